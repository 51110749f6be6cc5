package pkgstate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import (
	"errors"
	"regexp"
	"time"
)

var ErrX = errors.New("x")
var ErrY = &Error{Code: "y"}
var re = regexp.MustCompile("a")
var timeNow = time.Now
var counter int
var _ = counter

func init() {}

type Error struct{ Code string }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nvar inTests = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	var what []string
	for _, g := range got {
		what = append(what, g[strings.LastIndex(g, ": ")+2:])
	}
	if want := []string{"var timeNow", "var counter", "func init"}; !slices.Equal(what, want) {
		t.Errorf("Find = %q, want %q", got, want)
	}
}
