package tools

import (
	"maps"
	"slices"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/browser"
	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// TestToolTableComplete: the tool table (toolsets.go) has a row for every
// built-in tool, browse_page included, and none for a tool that is gone.
func TestToolTableComplete(t *testing.T) {
	t.Parallel()
	b, err := browser.New("/nonexistent/chromium", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(discovery.New(nil, nil), &Options{Browser: b})
	defer s.Close()
	var built []string
	for _, tl := range s.tools(true) {
		built = append(built, tl.tool.Name)
	}
	slices.Sort(built)
	if table := slices.Sorted(maps.Keys(toolTable())); !slices.Equal(built, table) {
		t.Errorf("built-in tools %v, tool table %v", built, table)
	}
	for name, e := range toolTable() {
		if !slices.Contains(groups(), e.group) {
			t.Errorf("%s: unknown group %q", name, e.group)
		}
	}
}
