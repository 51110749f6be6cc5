package mcpauth_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// Protect an MCP endpoint with an authorization server's access tokens: a
// request without one is answered 401 with a challenge that points at the
// resource's metadata, which names the authorization server.
func ExampleResource_Require() {
	res, err := mcpauth.New("https://login.example.org", "https://agent.example.org/mcp", &mcpauth.Options{Scopes: []string{"mcp"}})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", res.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := mcpauth.UserFrom(r.Context()) // the person: (iss, sub); log u, never u.Subject
		fmt.Fprintln(w, "hello", u)
	})))
	for _, p := range res.MetadataPaths() {
		mux.Handle(p, res.MetadataHandler())
	}

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))

	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil))
	var m map[string]any
	json.Unmarshal(rec.Body.Bytes(), &m)
	enc := json.NewEncoder(os.Stdout)
	enc.Encode(m)
	// Output:
	// 401 Bearer scope="mcp", resource_metadata="https://agent.example.org/.well-known/oauth-protected-resource/mcp"
	// {"authorization_servers":["https://login.example.org"],"bearer_methods_supported":["header"],"resource":"https://agent.example.org/mcp","resource_name":"poppy-mcp","scopes_supported":["mcp"]}
}

// A person's local user key is stable and opaque; logs show a shorter
// pseudonymous ID keyed by the deployment's secret, and never the subject.
func ExampleUser() {
	u := mcpauth.User{Issuer: "https://login.example.org", Subject: "dana@example.org"}
	ids, _ := mcpauth.NewLogIDs(bytes.Repeat([]byte{1}, 32)) // the deployment's secret
	fmt.Println(len(u.Key()), len(ids.Of(u)), u.String())
	// Work that holds only the key logs the same ID.
	fmt.Println(ids.OfKey(u.Key()) == ids.Of(u), ids.OfKey("") == "")
	// Output:
	// 43 12 user
	// true true
}
