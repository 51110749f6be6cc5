package pkgstate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFind: init functions, variables that hold state and assignments to
// package-level variables are found; error sentinels, compiled regexps and
// templates, blank variables, locals of the same name and test files are
// not.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"p.go": `package p

import (
	"errors"
	"html/template"
	"regexp"
	"time"
)

var ErrX = errors.New("x")
var ErrY = &Error{Code: "y"}
var re = regexp.MustCompile("a")
var page = template.Must(template.New("p").Parse("<p>"))
var timeNow = time.Now
var counter int
var _ = counter

func init() {}

type Error struct{ Code string }

func local() {
	re := 1
	re++
	var page int
	page = 2
	_, _ = re, page
}
`,
		"q.go": `package p

import "regexp"

func swap() {
	re = regexp.MustCompile("b")
	ErrX = nil
	_ = &page
}
`,
		"p_test.go": "package p\n\nvar inTests = 1\n\nfunc init() { ErrY = nil }\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	var what []string
	for _, g := range got {
		what = append(what, g[strings.LastIndex(g, ".go:")+4:][strings.Index(g[strings.LastIndex(g, ".go:")+4:], " ")+1:])
	}
	want := []string{"var timeNow", "var counter", "func init", "assigns re", "assigns ErrX", "takes the address of page"}
	if !slices.Equal(what, want) {
		t.Errorf("Find = %q,\nwant %q", got, want)
	}
}
