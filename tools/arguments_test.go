package tools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestArgumentsChecked: arguments that do not fit a tool's schema get an
// invalid_arguments result that names the argument, and the handler does
// not run. The old handlers read each argument with a type assertion and
// took a wrong type for an absent argument: refresh "yes" discovered
// without refreshing, a limit of "5" listed the default 20, a conversation
// ID of 7 was "not a conversation ID".
func TestArgumentsChecked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[1])
	for _, tc := range []struct {
		tool string
		args map[string]any
		name string // the argument the result names
	}{
		{"discover_company", map[string]any{"domain": "example.com", "refresh": "yes"}, "refresh"},
		{"list_api_operations", map[string]any{"domain": "example.com", "limit": "5"}, "limit"},
		{"sign_in_device", map[string]any{"domain": "example.com", "scopes": []any{1}}, "scopes"},
		{"send_message", map[string]any{"domain": "example.com", "context": map[string]any{"locale": 5}}, "locale"},
		{"read_events", map[string]any{"conversation_id": 7}, "conversation_id"},
		{"call_api", map[string]any{"domain": "example.com", "operation": "listOrders", "arguments": []any{"x"}}, "arguments"},
	} {
		res, got := call(t, cs, tc.tool, tc.args)
		text := res.Content[0].(*sdk.TextContent).Text
		if !res.IsError || got["error"] != "invalid_arguments" || !strings.Contains(text, tc.name) || !strings.Contains(text, "input schema") {
			t.Errorf("%s %v: %v %q", tc.tool, tc.args, got, text)
		}
	}
	if n := len(h.company.Sessions()); n != 0 {
		t.Errorf("arguments that did not fit started %d Sessions", n)
	}
}

// TestArgumentsLenient: what the schema's types allow in more than one
// JSON form is taken in each: an integer written 2.0, scopes as one string
// of scopes separated by spaces (as OAuth writes them), an explicit null
// for an optional argument.
func TestArgumentsLenient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	_, got := call(t, cs, "list_api_operations", map[string]any{"domain": domain, "limit": json.Number("2.0"), "query": nil})
	if ops := operations(got); len(ops) != 2 {
		t.Errorf("limit 2.0: %v", got)
	}
	res, got := call(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": "poppy:write poppy:read"})
	if res.IsError || !slices.Equal(anyStrings(got["scopes_requested"]), []string{"poppy:read", "poppy:write"}) {
		t.Errorf("scopes as one string: %v", got)
	}
}
