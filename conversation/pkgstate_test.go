package conversation

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/pkgstate"
)

// TestNoPackageState: the package keeps no state of its own: no init
// function, no package-level variable but error sentinels and compiled
// patterns. State lives in the values callers build.
func TestNoPackageState(t *testing.T) {
	found, err := pkgstate.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("package state: %s", f)
	}
}
