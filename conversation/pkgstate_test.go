package conversation

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/pkgstate"
)

// TestNoPackageState: the package keeps no state of its own: no init
// function, no package-level variable but error sentinels and compiled
// patterns. State lives in the values callers build.
func TestNoPackageState(t *testing.T) { pkgstate.Check(t, ".") }
