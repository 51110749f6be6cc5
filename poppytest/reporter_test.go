package poppytest_test

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func TestReporter(t *testing.T) {
	var logged []string
	r := &poppytest.Reporter{Log: func(m string) { logged = append(logged, m) }}
	var order []int
	r.Cleanup(func() { order = append(order, 1) })
	r.Cleanup(func() { order = append(order, 2) })
	r.Errorf("agent violated §%s", "4.3")
	if r.Failures() != 1 || len(logged) != 1 || logged[0] != "agent violated §4.3" {
		t.Errorf("failures %d, logged %q", r.Failures(), logged)
	}
	r.Close()
	r.Close()
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Errorf("cleanups ran %v, want [2 1] once", order)
	}
}
