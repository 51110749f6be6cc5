package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// toolsListBudget is the most bytes tools/list may take for the reference
// Company once a Session exists, with every capability's tools: poppy-mcp's
// own, one per OpenAPI operation (7) and the relayed MCP tools. A model reads
// all of it on every turn, so growth here is a cost to review.
const toolsListBudget = 24 << 10

// TestToolsListBudget checks the budget and the rules every tool must keep,
// including those that appear after a Session starts. Relayed MCP tools keep
// the upstream's schema byte for byte (issue 7), so only their names and
// annotations are held to poppy-mcp's rules.
func TestToolsListBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[0])
	call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	var names []string
	waitUntil(t, "the API and relayed tools", func() bool {
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			return false
		}
		names = names[:0]
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
		}
		s := strings.Join(names, " ")
		return strings.Contains(s, "example_com_api_") && strings.Contains(s, "example_com_mcp_")
	})
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(list)
	t.Logf("tools/list for the reference Company after start_session: %d tools, %d bytes (budget %d)", len(list.Tools), len(raw), toolsListBudget)
	if len(raw) > toolsListBudget {
		t.Errorf("tools/list is %d bytes, over the %d-byte budget", len(raw), toolsListBudget)
	}
	seen := map[string]bool{}
	for _, tl := range list.Tools {
		if !toolName.MatchString(tl.Name) || seen[tl.Name] {
			t.Errorf("tool name %q is invalid or repeated", tl.Name)
		}
		seen[tl.Name] = true
		if a := tl.Annotations; a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations not set: %+v", tl.Name, a)
		}
		if strings.HasPrefix(tl.Name, "example_com_mcp") {
			continue
		}
		var schema map[string]any
		b, _ := json.Marshal(tl.InputSchema)
		_ = json.Unmarshal(b, &schema)
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			if _, ok := schema[k]; ok || schema["type"] != "object" {
				t.Errorf("%s: input schema is not a plain object (%s)", tl.Name, k)
			}
		}
	}
}
