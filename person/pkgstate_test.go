package person

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/pkgstate"
)

// TestNoPackageState: person has no init function and no mutable
// package-level variable: what an operation needs is in the State its
// caller opens.
func TestNoPackageState(t *testing.T) { pkgstate.Check(t, ".") }
