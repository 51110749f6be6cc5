package tools

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// TestToolLabel: a built-in tool is labelled by its name, a Company's tool
// by the kind its prefix names, whatever name the Company gave it.
func TestToolLabel(t *testing.T) {
	t.Parallel()
	s := New(discovery.New(nil, nil), nil)
	defer s.Close()
	for name, want := range map[string]string{
		"start_session":                 "start_session",
		"list_api_operations":           "list_api_operations",
		"example_com_api_getOrder":      metrics.ToolAPIOperation,
		"shop_example_co_uk_api2_list":  metrics.ToolAPIOperation,
		"example_com_mcp_search":        metrics.ToolRelay,
		"example_com_8443_mcp3_x_api_y": metrics.ToolRelay,
		"verylong__abcdefghijklm_api_z": metrics.ToolAPIOperation,
		"api_at_start":                  metrics.ToolOther,
		"no-prefix":                     metrics.ToolOther,
	} {
		if got := s.toolLabel(name); got != want {
			t.Errorf("toolLabel(%q) = %q, want %q", name, got, want)
		}
	}
}

// FuzzToolLabel: whatever a Company names its tools, the label is a
// built-in tool's name or one of the kinds: a bounded set.
func FuzzToolLabel(f *testing.F) {
	for _, seed := range []string{"example_com_api_getOrder", "a_mcp_", "_api_", "x__api2_y", "send_message", ""} {
		f.Add(seed)
	}
	s := New(discovery.New(nil, nil), nil)
	defer s.Close()
	f.Fuzz(func(t *testing.T, name string) {
		switch got := s.toolLabel(name); {
		case got == metrics.ToolAPIOperation, got == metrics.ToolRelay, got == metrics.ToolOther:
		case s.builtinNames[got] && got == name:
		default:
			t.Fatalf("toolLabel(%q) = %q: not bounded", name, got)
		}
	})
}
