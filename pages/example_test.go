package pages_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

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

// Serve the user's pages under a public URL, to a browser that has shown the
// deployment's credential once: without the cookie, a page asks for it.
func ExampleCredentialGate() {
	s, err := pages.New(&pages.Options{
		PublicURL: "https://agent.example/pages",
		Gate:      pages.NewCredentialGate("the deployment's bearer token"),
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	u, _ := s.OpenForUser("", func(w http.ResponseWriter, r *http.Request, done func()) {
		io.WriteString(w, "the sign-in form")
	}, 0)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil)) // as mounted at /pages/ behind the proxy
	fmt.Println(rec.Code, strings.Contains(rec.Body.String(), "access token"))
	// Output:
	// 401 true
}
