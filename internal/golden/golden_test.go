package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a T that keeps what Check reports.
type recorder struct{ errs, fatals []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, a...))
}

// TestCheck: a match passes, a difference is reported with a diff, a
// missing file says how to create it, and -update writes the file (with
// its directory) so that the comparison passes.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "x.golden")

	var r recorder
	Check(&r, path, []byte("one\n"))
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "-update") {
		t.Errorf("missing file: %q", r.fatals)
	}

	*update = true
	r = recorder{}
	CheckJSON(&r, path, map[string]int{"a": 1})
	*update = false
	if b, _ := os.ReadFile(path); string(b) != "{\n  \"a\": 1\n}\n" || len(r.errs)+len(r.fatals) != 0 {
		t.Errorf("-update wrote %q; reported %q %q", b, r.errs, r.fatals)
	}

	r = recorder{}
	CheckJSON(&r, path, map[string]int{"a": 1})
	if len(r.errs)+len(r.fatals) != 0 {
		t.Errorf("a match reported %q %q", r.errs, r.fatals)
	}
	CheckJSON(&r, path, map[string]int{"a": 2})
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "differs (-want +got)") {
		t.Errorf("a difference reported %q", r.errs)
	}
}
