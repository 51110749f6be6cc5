package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files in testdata are what `go test -json` printed for a scratch
// module with a package of each kind (Go 1.26).

func summarizeFiles(t *testing.T, names ...string) (counts, string) {
	t.Helper()
	var in bytes.Buffer
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
	}
	var out bytes.Buffer
	c, err := summarize(&in, &out)
	if err != nil {
		t.Fatal(err)
	}
	return c, out.String()
}

// lastLine is the summary's last line, which must end it alone.
func lastLine(t *testing.T, out string) string {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		file  string
		want  counts
		last  string
		says  []string
		never []string
	}{
		{"good", counts{Passed: 3, Skipped: 2}, "3 passed, 0 failed, 2 skipped",
			[]string{"ok  \texample.com/scratch/good\t", "Skipped:\n",
				"  example.com/scratch/good TestSkip: needs Chromium: not installed (set POPPY_REQUIRE_CHROMIUM=1 to fail instead)\n",
				"  example.com/scratch/good TestSub/two: two is later\n"},
			[]string{"PASS", "=== RUN", "good_test.go"}},
		{"bad", counts{Passed: 1, Failed: 1}, "1 passed, 1 failed, 0 skipped",
			[]string{"--- FAIL: example.com/scratch/bad TestBroken\n", "bad_test.go:8: got 1", "bad_test.go:9: want 2", "FAIL\texample.com/scratch/bad\t"},
			[]string{"TestFine", "Skipped:"}},
		{"broken", counts{Failed: 1}, "0 passed, 1 failed, 0 skipped",
			[]string{"# example.com/scratch/broken [example.com/scratch/broken.test]\n", `broken.go:3:23: cannot use "x"`, "[build failed]"}, nil},
		{"notests", counts{}, "0 passed, 0 failed, 0 skipped", []string{"?   \texample.com/scratch/notests\t[no test files]\n"}, []string{"Skipped:"}},
		{"panics", counts{Failed: 1}, "0 passed, 1 failed, 0 skipped", []string{"panic: boom", "panics_test.go:5"}, nil},
	} {
		c, out := summarizeFiles(t, tc.file)
		if c != tc.want || lastLine(t, out) != tc.last {
			t.Errorf("%s: %+v, last line %q; want %+v, %q\n%s", tc.file, c, lastLine(t, out), tc.want, tc.last, out)
		}
		for _, s := range tc.says {
			if !strings.Contains(out, s) {
				t.Errorf("%s: no %q in\n%s", tc.file, s, out)
			}
		}
		for _, s := range tc.never {
			if strings.Contains(out, s) {
				t.Errorf("%s: %q in\n%s", tc.file, s, out)
			}
		}
	}
	if c, out := summarizeFiles(t, "good", "bad", "broken", "notests", "panics"); lastLine(t, out) != "4 passed, 3 failed, 2 skipped" || c.Failed != 3 {
		t.Errorf("all of them: %+v\n%s", c, out)
	}
}

// TestSummarizeUnfinished: a package that times out leaves its test
// running with no end event; that test fails, with its output.
func TestSummarizeUnfinished(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestSlow"}
{"Action":"output","Package":"p","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"p","Test":"TestSlow","Output":"    slow_test.go:9: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t600.01s\n"}
{"Action":"fail","Package":"p","Elapsed":600.01}
go: downloading example.com/x v1.0.0
`
	var out bytes.Buffer
	c, err := summarize(strings.NewReader(in), &out)
	if err != nil || c != (counts{Failed: 1}) {
		t.Fatalf("%+v, %v\n%s", c, err, out.String())
	}
	for _, s := range []string{"--- FAIL: p TestSlow (did not finish)", "slow_test.go:9: waiting", "panic: test timed out", "go: downloading example.com/x"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("no %q in\n%s", s, out.String())
		}
	}
}
