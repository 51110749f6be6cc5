package tools

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
)

// TestSignInToolTable: every sign-in kind of auth's table has one tool in
// the MCP half, in the same order, and each of those tools has its group
// (toolTable), so a kind added to auth without its tool fails here.
func TestSignInToolTable(t *testing.T) {
	t.Parallel()
	rows, kinds := signInToolTable(), auth.Kinds()
	if len(rows) != len(kinds) {
		t.Fatalf("%d sign-in tools for %d kinds", len(rows), len(kinds))
	}
	groups := toolTable()
	for i, k := range kinds {
		if rows[i].kind != k.Kind || toolOf(k.Kind) != rows[i].name {
			t.Errorf("row %d is %s (%s), want kind %s", i, rows[i].kind, rows[i].name, k.Kind)
		}
		if e, ok := groups[rows[i].name]; !ok || e.group != groupSignIn {
			t.Errorf("%s is not in the signin group of toolTable", rows[i].name)
		}
	}
}
