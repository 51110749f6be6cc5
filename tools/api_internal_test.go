package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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

func TestAPIToolPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":        "example_com_api_",
		"www.Example.com":    "example_com_api_",
		"localhost:8443":     "localhost_8443_api_",
		"shop.example.co.uk": "shop_example_co_uk_api_",
		"...":                "co_api_",
	} {
		if got := APIToolPrefix(in); got != want {
			t.Errorf("APIToolPrefix(%q) = %q, want %q", in, got, want)
		}
	}
	long := []string{"a-very-long-company.example", "a-very-long-company.example.org", "xn--bcher-kva.example.example"}
	seen := map[string]bool{}
	for _, in := range long {
		got := APIToolPrefix(in)
		if len(got) > 25 || !toolNameRule.MatchString(got) || seen[got] || got != APIToolPrefix(in) {
			t.Errorf("APIToolPrefix(%q) = %q: not short, valid, unique and stable", in, got)
		}
		seen[got] = true
	}
}

// TestDomainLabelHash: a long label keeps 8 characters, "__" (which no
// short label has) and 50 bits of hash, so the review's pair, which had the
// same 16-bit hash, no longer share a label.
func TestDomainLabelHash(t *testing.T) {
	hashed := regexp.MustCompile(`^[a-z0-9-]{1,8}__[a-z2-7]{10}$`)
	a, b := domainLabel("outdoor-gear-store.com"), domainLabel("outdoor-gear-st7286.example.net")
	if a == b || !hashed.MatchString(a) || !hashed.MatchString(b) || len(a) > 20 {
		t.Errorf("labels %q and %q: want distinct, 8 characters, __ and 50 bits of hash", a, b)
	}
	if a != domainLabel("www.Outdoor-Gear-Store.com") {
		t.Errorf("label %q is not stable", a)
	}
	if short := domainLabel("outdoor-gear.co"); short != "outdoor-gear_co" {
		t.Errorf("short label %q", short)
	}
}

// TestClaimPrefixes: a prefix that begins, or is begun by, another issuer's
// prefix or a built-in tool's name is refused, all or none; the same issuer
// may claim again.
func TestClaimPrefixes(t *testing.T) {
	s := New(Deps{})
	defer s.Close()
	const a, b = "https://auth.example.com", "https://auth.other.example"
	if err := s.claimPrefixes(a, "example_com_api_", "example_com_mcp_"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		issuer string
		claim  []string
		ok     bool
	}{
		{a, []string{"example_com_api_", "example_com_api2_"}, true},
		{b, []string{"example_com_api_"}, false},
		{b, []string{"example_com_api_x_"}, false},
		{b, []string{"example_com_"}, false},
		{b, []string{"example_com_api2_"}, false}, // a's now
		{b, []string{"list_api_"}, false},         // list_api_operations
		{b, []string{"example_co_api_", "example_com_mcp_"}, false},
		{b, []string{"example_co_api_"}, true}, // the refusal above recorded nothing
		{a, []string{"example_co_api_x_"}, false},
	} {
		err := s.claimPrefixes(tc.issuer, tc.claim...)
		if (err == nil) != tc.ok {
			t.Errorf("claim %v for %s: %v, want ok %v", tc.claim, tc.issuer, err, tc.ok)
		}
	}
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
		return &Server{log: slog.New(slog.DiscardHandler), apiState: newAPIState(), deps: Deps{
			Store: st, Discovery: discovery.New(&http.Client{Transport: cache.New(co.Transport(), nil)}, nil)}}
	}
}

// BenchmarkAPICatalog compares loading a Company's OpenAPI catalog on a
// first start (fetch and translate) with a second start that finds it in
// the store (If-None-Match, 304, decode).
func BenchmarkAPICatalog(b *testing.B) {
	ctx := context.Background()
	co, start := benchCompany(b)
	load := func(b *testing.B, s *Server) {
		apis := s.apis(ctx, co)
		if len(apis) != 1 || apis[0].cat == nil || len(apis[0].cat.Tools) == 0 {
			b.Fatalf("no catalog: %v", apis[0].err)
		}
	}
	b.Run("first-start", func(b *testing.B) {
		for b.Loop() {
			s := start()
			if err := s.deps.Store.DeleteBlob(ctx, co.Document.APIs[0].URL); err != nil {
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
