package pages_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/poppy-mcp/poppy-mcp/pages"
)

// Serve a one-time page: the first visit gets it, the second a 410.
func ExampleServer_Open() {
	s, err := pages.New(nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	u, _ := s.Open(func(w http.ResponseWriter, r *http.Request, done func()) {
		done() // one use only
		io.WriteString(w, "hello")
	}, 0)
	for range 2 {
		resp, err := http.Get(u)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	// Output:
	// 200 no-store
	// 410 no-store
}
