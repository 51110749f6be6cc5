package app

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/pkgstate"
)

// TestNoPackageState: app has no init function and no mutable
// package-level variable: what an App holds is a field of the struct New
// builds, and the test seams are fields too (HTTPOptions.terminal).
func TestNoPackageState(t *testing.T) { pkgstate.Check(t, ".") }
