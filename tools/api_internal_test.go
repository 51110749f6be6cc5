package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

var toolNameRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// FuzzLoadAPITools: whatever a Company's document holds, its tools marshal
// to MCP Tool JSON with valid names and an object input schema, or the
// document is refused.
func FuzzLoadAPITools(f *testing.F) {
	for _, p := range []string{"../openapi2tools/testdata/petstore.json", "../openapi2tools/testdata/nasty/clashes.json"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data, "example.com")
		}
	}
	f.Add([]byte(`{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/x/{id}":{"get":{"operationId":"a b\u0000c"}}}}`), "www.Ex-ample.co.uk:8443")
	f.Add([]byte("openapi: 3.0.0\npaths: {}\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, domain string) {
		_, defs, err := LoadAPITools(context.Background(), data, "https://api.example.com/openapi.json", domain)
		if err != nil {
			return
		}
		for _, d := range defs {
			raw, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("%s does not marshal: %v", d.Name, err)
			}
			var back struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"inputSchema"`
			}
			if err := json.Unmarshal(raw, &back); err != nil || !toolNameRule.MatchString(back.Name) || back.InputSchema["type"] != "object" {
				t.Fatalf("tool %s: %v", raw, err)
			}
		}
	})
}

// benchCompany serves GitHub's document when fetched (else the store API's)
// and returns a Server's dependencies for it, with a fresh cache: a new
// start of poppy-mcp.
func benchCompany(b *testing.B) (*discovery.Company, func() *Server) {
	b.Helper()
	ctx := context.Background()
	data, err := os.ReadFile("../testdata-external/node_modules/@octokit/openapi/generated/api.github.com.json")
	opts := &poppytest.Options{}
	if err == nil {
		opts.PoppyJSON = func(doc map[string]any) {
			doc["apis"] = []any{map[string]any{"type": "openapi", "url": "https://api.example.com/github.json", "description": "GitHub"}}
		}
	} else {
		b.Log("GitHub's document is absent (scripts/fetch-openapi-specs.sh): benchmarking the store API's")
	}
	co := poppytest.NewServer(b, opts)
	if data != nil {
		co.SetDocument("api.example.com", "/github.json", 200, http.Header{"Content-Type": {"application/json"}}, data)
	}
	st, err := store.Open(ctx, b.TempDir(), &store.Options{Key: bytes.Repeat([]byte{7}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	company, err := discovery.New(co.Client(), nil).Discover(ctx, "example.com", false)
	if err != nil {
		b.Fatal(err)
	}
	return company, func() *Server {
		s := New(discovery.New(&http.Client{Transport: cache.New(co.Transport(), nil)}, nil), &Options{Store: st})
		b.Cleanup(s.Close)
		return s
	}
}

// BenchmarkAPICatalog compares loading a Company's OpenAPI catalog on a
// first start (fetch and translate) with a second start that finds it in
// the store (If-None-Match, 304, decode).
func BenchmarkAPICatalog(b *testing.B) {
	ctx := context.Background()
	co, start := benchCompany(b)
	load := func(b *testing.B, s *Server) {
		apis := s.apis.load(ctx, co)
		if len(apis) != 1 || apis[0].cat == nil || len(apis[0].cat.Tools) == 0 {
			b.Fatalf("no catalog: %v", apis[0].err)
		}
	}
	b.Run("first-start", func(b *testing.B) {
		for b.Loop() {
			s := start()
			if err := s.apis.store.DeleteBlob(ctx, co.Document.APIs[0].URL); err != nil {
				b.Fatal(err)
			}
			load(b, s)
		}
	})
	b.Run("second-start", func(b *testing.B) {
		load(b, start()) // stores the catalog
		for b.Loop() {
			load(b, start())
		}
	})
}
