package tools

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/pkgstate"
)

// TestNoPackageState: tools has no init function and no mutable
// package-level variable: every capability's state is a field of a struct
// New builds, so all of it can be found by following calls from New.
func TestNoPackageState(t *testing.T) { pkgstate.Check(t, ".") }
