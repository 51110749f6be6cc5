package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTableAlignsColour: a coloured status word takes the width of the
// plain one, so columns line up the same on a terminal.
func TestTableAlignsColour(t *testing.T) {
	t.Parallel()
	lines := func(color bool) []string {
		var b bytes.Buffer
		u := &ui{w: &b, color: color}
		u.table("", [][]string{{u.cell(statusOK), "state_dir", "fine"}, {u.cell(statusWarn), "clock", "off"}})
		return strings.Split(strings.TrimSpace(b.String()), "\n")
	}
	plain, coloured := lines(false), lines(true)
	for i := range plain {
		stripped := strings.NewReplacer("\x1b[32m", "", "\x1b[33m", "", "\x1b[0m", "").Replace(coloured[i])
		if stripped != plain[i] || !strings.Contains(coloured[i], "\x1b[") {
			t.Errorf("line %d: coloured %q, plain %q", i, coloured[i], plain[i])
		}
	}
	if colorTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is taken for a terminal")
	}
}
