package mcpproxy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/mcpproxy"
)

// resultParts splits a tools/call result as it crossed the wire.
type resultParts struct {
	Content    []json.RawMessage `json:"content"`
	Structured json.RawMessage   `json:"structuredContent"`
	Meta       map[string]any    `json:"_meta"`
}

func parts(t *testing.T, raw []byte) resultParts {
	t.Helper()
	var p resultParts
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return p
}

// TestResultsMarked: with Meta and Note, a relayed result carries the
// mark where a client sees it, before the upstream's blocks, which stay
// byte for byte; the hidden characters of the upstream's text are shown
// as escapes, and nothing else of that block changes. The old relay passed
// results through unmarked, format characters and all.
func TestResultsMarked(t *testing.T) {
	const note = "[example.com MCP server: Company text]"
	meta := map[string]any{"poppy/company_content": map[string]any{"domain": "example.com"}}
	f := newFixtureWith(t, nil, nil, &mcpproxy.RelayOptions{Meta: meta, Note: note})
	f.co.MCPAddTool("echo", "Says the text again.")
	f.sync(t)
	direct, down := f.direct(t), f.downstream(t, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"search_products", map[string]any{"query": "jacket"}},
		{"product_image", map[string]any{"sku": "rain-hat-os"}},
		{"product_image", map[string]any{"sku": "stormline-m"}},
		{"echo", map[string]any{"text": "ord_1042, <fine> & plain"}},
	} {
		want := parts(t, direct.result("tools/call", map[string]any{"name": tc.tool, "arguments": tc.args}))
		got := parts(t, down.result("tools/call", map[string]any{"name": "ex_" + tc.tool, "arguments": tc.args}))
		if len(got.Content) != len(want.Content)+1 || !strings.Contains(string(got.Content[0]), note) {
			t.Fatalf("%s: content %s, want the note, then %s", tc.tool, got.Content, want.Content)
		}
		for i := range want.Content {
			if string(got.Content[i+1]) != string(want.Content[i]) {
				t.Errorf("%s: block %d changed:\n got %s\nwant %s", tc.tool, i, got.Content[i+1], want.Content[i])
			}
		}
		if string(got.Structured) != string(want.Structured) {
			t.Errorf("%s: structured content %s, want %s", tc.tool, got.Structured, want.Structured)
		}
		if mark, _ := got.Meta["poppy/company_content"].(map[string]any); mark["domain"] != "example.com" {
			t.Errorf("%s: _meta %v, want the mark", tc.tool, got.Meta)
		}
	}
	hidden := "ord_1\u202E2\U000E0069"
	got := parts(t, down.result("tools/call", map[string]any{"name": "ex_echo", "arguments": map[string]any{"text": hidden}}))
	var block struct{ Type, Text string }
	if err := json.Unmarshal(got.Content[1], &block); err != nil || block.Type != "text" || block.Text != `ord_1\u202E2\uDB40\uDC69` {
		t.Errorf("echo of hidden characters: %s, want them shown as escapes", got.Content[1])
	}
	if !slices.ContainsFunc(got.Content, func(c json.RawMessage) bool { return strings.Contains(string(c), note) }) {
		t.Error("no note")
	}
}
