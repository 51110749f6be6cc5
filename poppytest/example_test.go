package poppytest_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func ExampleNewServer() {
	t := &poppytest.Reporter{} // in a test, pass the *testing.T
	defer t.Close()
	s := poppytest.NewServer(t, nil)

	resp, err := s.Client().Get(s.URL(s.Domain(), "/.well-known/poppy.json"))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Auth struct {
			Issuer string `json:"issuer"`
		} `json:"auth"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), doc.Auth.Issuer)
	fmt.Println(s.Count(s.Domain(), "/.well-known/poppy.json"), "request,", len(s.Violations()), "violations")
	// Output:
	// 200 application/json https://auth.example.com
	// 1 request, 0 violations
}

func ExampleServer_Authenticate() {
	t := &poppytest.Reporter{}
	defer t.Close()
	s := poppytest.NewServer(t, nil)

	// A protected MCP endpoint: Authenticate checks the Session Token and
	// writes the challenge when it fails.
	mcpURL := s.URL("mcp."+s.Domain(), "/mcp")
	s.HandleFunc("mcp."+s.Domain(), "POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.Authenticate(w, r, mcpURL)
		if !ok {
			return
		}
		fmt.Fprintf(w, "hello %s", caller.UserID)
	})

	resp, err := s.Client().Post(mcpURL, "application/json", strings.NewReader("{}"))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	// Output:
	// 401 Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
}
