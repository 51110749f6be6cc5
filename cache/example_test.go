package cache_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/poppy-mcp/poppy-mcp/cache"
)

func ExampleNew() {
	company := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"poppy_domains":["example.com"]}`)
	}))
	defer company.Close()

	tr := cache.New(nil, nil) // nil: http.DefaultTransport
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(company.URL + "/.well-known/poppy.json")
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Header.Get(cache.HeaderCache), string(body))
	}
	s := tr.Stats()
	fmt.Println("hits:", s.Hits, "misses:", s.Misses)

	// Ask for validation, as discover_company refresh=true does. Without an
	// ETag or Last-Modified this fetches the document again.
	req, _ := http.NewRequest(http.MethodGet, company.URL+"/.well-known/poppy.json", nil)
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Header.Get(cache.HeaderCache))

	// Output:
	// miss {"poppy_domains":["example.com"]}
	// hit {"poppy_domains":["example.com"]}
	// hits: 1 misses: 1
	// miss
}
