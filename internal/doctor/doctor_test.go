package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/published"
)

// TestCheckStateDir: a missing directory is a warning for SQLite and
// information for PostgreSQL; one others can read is an error that names
// what is loose; a private one is ok.
func TestCheckStateDir(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "none")
	if ch, exists := checkStateDir(missing, true); exists || ch.Status != StatusWarn {
		t.Errorf("missing, SQLite: %+v %v", ch, exists)
	}
	if ch, exists := checkStateDir(missing, false); exists || ch.Status != StatusInfo {
		t.Errorf("missing, PostgreSQL: %+v %v", ch, exists)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ch, exists := checkStateDir(dir, true); !exists || ch.Status != StatusOK {
		t.Errorf("private: %+v %v", ch, exists)
	}
	if err := os.Chmod(filepath.Join(dir, "state.db"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ch, _ := checkStateDir(dir, true); ch.Status != StatusError || !strings.Contains(ch.Message, "state.db is 0644, want 0600") {
		t.Errorf("a readable file: %+v", ch)
	}
}

// TestDocStatus: a document with problems is an error, one with notes
// only a warning, and the summary says what was found.
func TestDocStatus(t *testing.T) {
	t.Parallel()
	ok := published.Doc{URL: "https://agent.example/agent.json", OK: true}
	if DocStatus(ok) != StatusOK || !strings.Contains(DocSummary(ok), "the same as the state's") {
		t.Errorf("a matching document: %s %q", DocStatus(ok), DocSummary(ok))
	}
	noted := published.Doc{URL: ok.URL, OK: true, Notes: []string{"also has key \"x\""}}
	if DocStatus(noted) != StatusWarn || !strings.Contains(DocSummary(noted), "also has key") {
		t.Errorf("a document with a note: %s %q", DocStatus(noted), DocSummary(noted))
	}
	if bad := (published.Doc{URL: ok.URL, Problems: []string{"not reachable"}}); DocStatus(bad) != StatusError {
		t.Errorf("a document with a problem: %s", DocStatus(bad))
	}
}
