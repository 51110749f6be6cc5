package tools_test

import (
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestDiscoverSkipsWhatItDoesNotUse: Poppy 0.1 §3.3 "MUST ignore extensions
// they don't support", §6 (an MCP API without usable metadata is not used)
// and §7.1 "skips unfamiliar types". A misnamed extension, a versionless
// one, an unfamiliar conversation protocol without an https endpoint and an
// MCP server whose metadata names another issuer are reported, each marked
// as not blocking use, and refuse nothing: discover_company calls the
// Company usable, a Session starts, the OpenAPI API works, and only the
// broken MCP server is left out.
func TestDiscoverSkipsWhatItDoesNotUse(t *testing.T) {
	t.Parallel()
	opts := &poppytest.Options{
		PoppyJSON: func(d map[string]any) {
			d["extensions"] = map[string]any{"gift-wrap": map[string]any{"version": "1"}, "example.com/no-version": map[string]any{}}
			agent := d["agent"].(map[string]any)
			agent["protocols"] = append(agent["protocols"].([]any), map[string]any{"type": "a2a", "endpoint": "http://api.example.com/a2a"})
		},
		ResourceMetadata: func(m map[string]any) { m["authorization_servers"] = []any{"https://auth.evil.example"} },
	}
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newRelayHarness(t, opts)
			cs := h.connect(t, rev)
			res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
			if res.IsError || got["usable"] != true {
				t.Fatalf("discover_company: %v", got)
			}
			skipped := 0
			for _, f := range got["findings"].([]any) {
				f := f.(map[string]any)
				if f["blocks_use"] != false {
					t.Errorf("finding blocks use: %v", f)
				}
				if f["severity"] == "error" {
					skipped++
				}
			}
			if skipped != 3 || !strings.Contains(textOf(res), "does not block use") {
				t.Errorf("%d skipped errors, want 3 (two extensions, the MCP metadata): %s", skipped, textOf(res))
			}
			if res, got := call(t, cs, "start_session", map[string]any{"domain": "example.com"}); res.IsError {
				t.Fatalf("start_session: %v", got)
			}
			if res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts"}); res.IsError || got["status"] != 200.0 {
				t.Errorf("call_api: %v", got)
			}
			if n := len(relayedTools(t, cs)); n != 0 {
				t.Errorf("%d tools relayed from the MCP server whose metadata names another issuer", n)
			}
		})
	}
}

// TestDiscoverTextPlain: documents served as text/plain are read when they
// parse as JSON objects, with a warning for each; the Company is usable and
// its OpenAPI API works.
func TestDiscoverTextPlain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &poppytest.Options{DocumentContentType: "text/plain"})
	cs := h.connect(t, revisions[len(revisions)-1])
	res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	findings, _ := got["findings"].([]any)
	if res.IsError || got["usable"] != true || len(findings) != 3 {
		t.Fatalf("discover_company: %v", got)
	}
	for _, f := range findings {
		if f := f.(map[string]any); f["severity"] != "warning" || !strings.Contains(f["message"].(string), `Content-Type Company text "text/plain"`) {
			t.Errorf("finding %v", f)
		}
	}
	if _, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"}); got["total"] == 0.0 || got["total"] == nil {
		t.Errorf("list_api_operations: %v", got)
	}
}
