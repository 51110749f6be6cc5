// Package golden compares what a test produced with a file kept under
// testdata, for what crosses a wire or reaches an MCP client: tool
// definitions, wire transcripts, translated OpenAPI documents. Run the
// tests with -update to rewrite the files from the current output, then
// review the diff before committing it.
//
// It is the one place that declares the -update flag: a test binary that
// imports it gets the flag, and no test file declares its own.
package golden

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"

	"github.com/google/go-cmp/cmp"
)

// update is the -update flag of every test binary that imports this package.
var update = flag.Bool("update", false, "rewrite golden files under testdata from the current output")

// T is what Check needs of a test; *testing.T satisfies it.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }

// Check compares got with the file at path (relative to the package under
// test, such as testdata/wire.golden) and reports a difference as an error
// with a diff; with -update it writes got to path first, creating its
// directory.
func Check(t T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden: %v (run the test with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("golden: %s differs (-want +got); review, then run the test with -update if the change is intended:\n%s", path, d)
	}
}

// CheckJSON is Check for v as indented JSON with a final newline.
func CheckJSON(t T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("golden: %v", err)
	}
	Check(t, path, append(got, '\n'))
}
