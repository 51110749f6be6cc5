package tools

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/testparallel"
)

// TestMain runs more parallel tests at once than there are cores: tools'
// tests mostly wait on poppytest's intervals and leases, not on the CPU.
func TestMain(m *testing.M) { testparallel.Run(m) }
