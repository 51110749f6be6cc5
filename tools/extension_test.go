package tools_test

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestExtensionRequired: a Company that answers extension_required (Poppy
// 0.1 §3.3) for a Session, an API operation, a conversation or a relayed
// MCP tool gets a result that names the extension, says poppy-mcp cannot do
// this and retrying will not help, and names what else may. On the old code
// each of these said "Try again later".
func TestExtensionRequired(t *testing.T) {
	t.Parallel()
	const ext = "example.com/gift-wrap"
	cases := []struct {
		name, host, path, tool string
		args                   map[string]any
		instead                string
	}{
		{"api", "api.example.com", "/store/products", "call_api",
			map[string]any{"domain": "example.com", "operation": "listProducts"}, "send_message"},
		{"conversation", "api.example.com", "/poppy/conversations", "send_message",
			map[string]any{"domain": "example.com", "text": "hello"}, "open_website"},
		{"relay", "mcp.example.com", "/mcp", relayPrefix + "search_products",
			map[string]any{"query": "boots"}, "send_message"},
		{"session", "auth.example.com", "/oauth/token", "start_session",
			map[string]any{"domain": "example.com"}, "website"},
	}
	for _, rev := range revisions {
		for _, tc := range cases {
			t.Run(rev+"/"+tc.name, func(t *testing.T) {
				h := newRelayHarness(t, nil)
				cs := h.connect(t, rev)
				if tc.name != "session" {
					call(t, cs, "start_session", map[string]any{"domain": "example.com"})
				}
				h.company.RequireExtension(tc.host, tc.path, ext)
				res, got := call(t, cs, tc.tool, tc.args)
				text := res.Content[0].(*sdk.TextContent).Text
				if !res.IsError || got["error"] != "extension_required" || got["extension"] != ext {
					t.Fatalf("%s: %v %q", tc.tool, got, text)
				}
				for _, want := range []string{`"` + ext + `"`, "cannot", "will not help", tc.instead} {
					if !strings.Contains(text, want) {
						t.Errorf("%s: text lacks %q: %q", tc.tool, want, text)
					}
				}
				if strings.Contains(text, "Try again later") {
					t.Errorf("%s: still says to try again: %q", tc.tool, text)
				}
				if h.company.Served("extension_required") == 0 {
					t.Errorf("the Company never answered extension_required")
				}
				if tc.name != "session" { // no Session: no secret was ever issued to scan for
					scanForSecrets(t, h, res)
				}
			})
		}
	}
}
