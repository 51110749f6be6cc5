package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// TestArgumentsAgainstSchema: arguments are checked against the input
// schema each tool publishes, poppy-mcp's own and each API operation's
// (called as its own tool or through call_api): an unknown argument (with
// the nearest known name), a wrong type, a missing required argument and a
// value outside an enum are invalid_arguments results that name the
// argument, and nothing reaches the Company. Before, an unknown argument was
// ignored and an enum was the Company's to check.
func TestArgumentsAgainstSchema(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newAPIHarness(t, nil, 0)
			cs := h.connect(t, rev)
			call(t, cs, "start_session", map[string]any{"domain": domain})
			waitUntil(t, "the operation tools", func() bool {
				list, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					return false
				}
				for _, tl := range list.Tools {
					if tl.Name == "example_com_api_getOrder" {
						return true
					}
				}
				return false
			})
			before := apiRequests(h)
			for _, tc := range []struct {
				tool string
				args map[string]any
				want []string // in the text
			}{
				{"discover_company", map[string]any{"domain": domain, "bogus_arg": 1}, []string{"`bogus_arg` is not an argument (known: domain, refresh)"}},
				{"sign_in_device", map[string]any{"domain": domain, "scope": []string{"poppy:read"}},
					[]string{"`scope` is not an argument (did you mean `scopes`?)", "`scopes` is required"}},
				{"list_api_operations", map[string]any{"domain": domain, "limit": "5"}, []string{"`limit` must be integer, not string"}},
				{"send_message", map[string]any{"domain": domain, "txet": "hi"}, []string{"`txet` is not an argument (did you mean `text`?)"}},
				{"call_api", map[string]any{"domain": domain, "operation": "listOrders", "arguments": map[string]any{"status": "lost"}},
					[]string{"`status` must be one of [\"processing\",\"shipped\",\"delivered\"], not \"lost\""}},
				{"example_com_api_listOrders", map[string]any{"statuss": "shipped"}, []string{"`statuss` is not an argument (did you mean `status`?)"}},
				{"example_com_api_listOrders", map[string]any{"status": "lost"}, []string{"`status` must be one of"}},
				{"example_com_api_listOrders", map[string]any{"status": 5}, []string{"`status` must be string, not number"}},
				{"example_com_api_getOrder", map[string]any{}, []string{"`order_id` is required"}},
			} {
				res, got := call(t, cs, tc.tool, tc.args)
				text := textOf(res)
				if !res.IsError || got["error"] != "invalid_arguments" || !strings.Contains(text, "input schema") {
					t.Errorf("%s %v: %v", tc.tool, tc.args, got)
				}
				for _, w := range tc.want {
					// The detail of an operation's schema names the Company's
					// values, so its summary quotes it as Company text.
					quoted := strings.TrimSuffix(strings.TrimPrefix(untrusted.Quote(w, 0), `Company text "`), `"`)
					if !strings.Contains(text, w) && !strings.Contains(text, quoted) {
						t.Errorf("%s %v: the text does not say %q:\n%s", tc.tool, tc.args, w, text)
					}
				}
			}
			if after := apiRequests(h); after != before {
				t.Errorf("arguments that did not fit reached the Company's API: %d requests", after-before)
			}
			if _, got := call(t, cs, "example_com_api_listOrders", map[string]any{"status": "shipped"}); got["error"] != "sign_in_required" {
				t.Errorf("arguments that fit: %v", got)
			}
		})
	}
}

// apiRequests counts the requests for orders the Company's API received.
func apiRequests(h *harness) int {
	n := 0
	for _, r := range h.company.Requests() {
		if r.Host == "api.example.com" && strings.Contains(r.Path, "/orders") {
			n++
		}
	}
	return n
}

// TestRelayedArgumentsNotChecked: a relayed MCP tool keeps the Company's
// schema and the Company checks its arguments: poppy-mcp sends even an
// argument that schema does not name.
func TestRelayedArgumentsNotChecked(t *testing.T) {
	t.Parallel()
	h := newRelayHarness(t, nil)
	cs := h.connect(t, revisions[1])
	call(t, cs, "start_session", map[string]any{"domain": domain})
	waitUntil(t, "the relayed tools", func() bool { return relayedTools(t, cs)["example_com_mcp_search_products"] != nil })
	res, raw := call2(t, cs, "example_com_mcp_search_products", map[string]any{"query": "hat", "bogus_arg": 1})
	if strings.Contains(raw, "invalid_arguments") {
		t.Fatalf("poppy-mcp checked a relayed tool's arguments: %s", raw)
	}
	for _, r := range h.company.Requests() {
		if r.Host == "mcp.example.com" && strings.Contains(string(r.Body), `"bogus_arg"`) {
			return
		}
	}
	t.Errorf("the call did not reach the Company's MCP server: %v", res)
}
