package tools_test

import (
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestDiscoverTextPlain: documents served as text/plain are read when they
// parse as JSON objects, with a warning for each; the Company is usable and
// its OpenAPI API works.
func TestDiscoverTextPlain(t *testing.T) {
	h := newHarness(t, &poppytest.Options{DocumentContentType: "text/plain"})
	cs := h.connect(t, revisions[len(revisions)-1])
	res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	findings, _ := got["findings"].([]any)
	if res.IsError || got["usable"] != true || len(findings) != 3 {
		t.Fatalf("discover_company: %v", got)
	}
	for _, f := range findings {
		if f := f.(map[string]any); f["severity"] != "warning" || !strings.Contains(f["message"].(string), `Content-Type "text/plain"`) {
			t.Errorf("finding %v", f)
		}
	}
	if _, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"}); got["total"] == 0.0 || got["total"] == nil {
		t.Errorf("list_api_operations: %v", got)
	}
}
