package mcpproxy

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestRelayedAnnotations: a relayed tool shows MCP's most cautious hints
// whatever the Company claims, and the claims that would lower caution are
// kept in _meta as the Company's word; the upstream cannot forge that key.
// On the old code a tool marked read-only was relayed read-only.
func TestRelayedAnnotations(t *testing.T) {
	cases := []struct {
		name, raw string
		claims    map[string]any // nil: no key in _meta
	}{
		{"read-only claim", `{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
			map[string]any{"readOnlyHint": true}},
		{"every safe claim", `{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}`,
			map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}},
		{"cautious claims", `{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":true}}`,
			nil},
		{"none", `{"name":"a","inputSchema":{"type":"object"}}`, nil},
		{"forged key", `{"name":"a","inputSchema":{"type":"object"},"_meta":{"poppy/company_annotations":{"readOnlyHint":true},"k":"v"}}`,
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := relayTool(json.RawMessage(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			a := tool.Def.Annotations
			if *a.ReadOnlyHint || !*a.DestructiveHint || *a.IdempotentHint || !*a.OpenWorldHint {
				t.Errorf("hints not the cautious ones: %+v", a)
			}
			b, _ := json.Marshal(tool.Def)
			var def struct {
				Meta map[string]any `json:"_meta"`
			}
			_ = json.Unmarshal(b, &def)
			got, _ := def.Meta[CompanyAnnotationsKey].(map[string]any)
			if !reflect.DeepEqual(got, tc.claims) && (len(got) != 0 || tc.claims != nil) {
				t.Errorf("_meta claims %v, want %v", got, tc.claims)
			}
		})
	}
}
