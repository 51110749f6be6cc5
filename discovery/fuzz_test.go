package discovery_test

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// The parsers of Company documents take hostile input: they must never panic,
// and a document they accept must go through every check without panicking.

func FuzzPoppyJSON(f *testing.F) {
	for _, seed := range []string{
		specExample, `{}`, `[]`, `null`, `{"protocol_version":1}`, `{"apis":[{"type":"mcp"}]}`,
		`{"auth":{"mediated":{"fields":[{}]}}}`, `{"extensions":{"a/b":1}}`, `{"organization":{"domain":"[::1]:80"}}`,
	} {
		f.Add([]byte(seed), "example.com")
	}
	f.Fuzz(func(t *testing.T, data []byte, host string) {
		doc, fs := discovery.ParseDocument(data)
		if doc == nil {
			if len(fs) == 0 {
				t.Fatal("a rejected document has no finding")
			}
			return
		}
		discovery.CheckDocument(doc, host)
		if doc.Auth != nil {
			md, _ := discovery.ParseMetadata(data)
			if md != nil {
				discovery.CheckMetadata(md, doc)
			}
		}
	})
}

func FuzzMetadata(f *testing.F) {
	f.Add([]byte(`{"issuer":"https://auth.example.com","token_endpoint":"https://auth.example.com/t","poppy_domains":["example.com"]}`))
	f.Add([]byte(`{"poppy_domains":"example.com"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, _ := discovery.ParseDocument([]byte(specExample))
		if md, _ := discovery.ParseMetadata(data); md != nil {
			discovery.CheckMetadata(md, doc)
		}
		if rmd, _ := discovery.ParseResourceMetadata(data); rmd != nil {
			discovery.CheckResourceMetadata(rmd, discovery.API{Type: "mcp", URL: "https://mcp.example.com/mcp"}, "https://auth.example.com")
		}
	})
}

func FuzzNormalizeDomain(f *testing.F) {
	for _, s := range []string{"example.com", "https://Example.com/", "[::1]:8443", "a:b:c", "http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := discovery.NormalizeDomain(in)
		if err != nil {
			return
		}
		again, err := discovery.NormalizeDomain(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, got, again, err)
		}
	})
}

// specExample is the document of Poppy 0.1 §3.
const specExample = `{
  "protocol_version": "0.1",
  "organization": {"name": "Example Company", "domain": "example.com"},
  "auth": {
    "issuer": "https://auth.example.com",
    "direct": {"scopes": ["poppy:read", "poppy:write", "addresses"]},
    "device": {"scopes": ["poppy:read", "poppy:write"]},
    "mediated": {"endpoint": "https://auth.example.com/poppy/sign-in",
      "fields": [{"name": "email", "label": "Email", "secret": false}, {"name": "password", "label": "Password", "secret": true}],
      "scopes": ["poppy:read"]},
    "custom_scopes": {"addresses": "Manage saved shipping addresses"}
  },
  "agent": {"protocols": [{"type": "poppy", "endpoint": "https://api.example.com/poppy/conversations"}]},
  "web": {"browser_session_endpoint": "https://example.com/poppy/browser-session"},
  "apis": [
    {"type": "openapi", "url": "https://api.example.com/openapi.json", "description": "Orders, returns, and exchanges"},
    {"type": "mcp", "url": "https://mcp.example.com/mcp", "description": "Product search and sizing"}
  ],
  "extensions": {"operations": {"version": "1", "endpoint": "https://api.example.com/poppy/operations"}}
}`

func TestSpecExampleIsClean(t *testing.T) {
	doc, fs := discovery.ParseDocument([]byte(specExample))
	if doc == nil {
		t.Fatal(fs)
	}
	if fs := discovery.CheckDocument(doc, "example.com"); len(fs) != 0 {
		t.Fatalf("the spec's own example has findings: %v", fs)
	}
}
