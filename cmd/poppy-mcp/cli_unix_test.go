//go:build linux

package main

import (
	"github.com/poppy-mcp/poppy-mcp/internal/localfile"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDoctorConfigNeverEnds: a project's .mcp.json linked to /dev/zero, a
// Cursor configuration that is a FIFO nobody writes, and a VS Code one whose
// server name carries terminal escapes. doctor ends (exit 1: errors), under
// 200 MiB, says what each is, and prints the name with its escapes escaped.
// Before, doctor read /dev/zero until memory ran out, would have waited on
// the FIFO for ever, and printed the name raw (clearing the screen and
// retitling the terminal).
//
// Not parallel: a child started by os/exec shares the test process's memory
// until it execs, and Linux counts that in the child's ru_maxrss, so the
// figure is only the child's while no parallel test is running.
func TestDoctorConfigNeverEnds(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(work, ".mcp.json")); err != nil {
		t.Skip("no /dev/zero to link to:", err)
	}
	mkdirs(t, filepath.Join(work, ".cursor"), filepath.Join(work, ".vscode"))
	if err := syscall.Mkfifo(filepath.Join(work, ".cursor", "mcp.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	const name = "poppy\x1b]0;pwned\x07\x1b[2J\u009b"
	vscode := `{"servers": {` + jsonString(name) + `: {"command": "poppy-mcp", "args": ["serve"]},}, // JSONC
}`
	writeFile(t, filepath.Join(work, ".vscode", "mcp.json"), vscode)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "POPPY_STATE_KEY=" + newKey()}
	r := runBinaryAt(t, work, 20*time.Second, env, "doctor", "--state-dir", filepath.Join(home, "state"))
	if r.code != 1 {
		t.Errorf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	ru, ok := r.state.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no resource use")
	}
	if peak := int64(ru.Maxrss) << 10; peak == 0 || peak > 200<<20 { // Linux: ru_maxrss in KiB
		t.Errorf("peak memory %d MiB, want under 200", peak>>20)
	}
	for _, want := range []string{".mcp.json (JSON): cannot be read: it is a device, not a regular file",
		"mcp.json (JSON): cannot be read: it is a FIFO, not a regular file", `poppy\x1b]0;pwned\x07\x1b[2J\u009b`, "(JSONC): 1 poppy-mcp entry"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.ContainsAny(r.stdout, "\x1b\x07\u009b") {
		t.Errorf("doctor printed a control character raw: %q", r.stdout)
	}
}

// TestDoctorConfigTooLarge: a configuration past localfile.MaxConfigFile is not read
// and is a warning (the assistant may read it; doctor could not check it),
// with doctor's exit status unchanged by it.
func TestDoctorConfigTooLarge(t *testing.T) {
	t.Parallel()
	home, work := t.TempDir(), t.TempDir()
	f, err := os.Create(filepath.Join(home, ".claude.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(localfile.MaxConfigFile + 1); err != nil { // sparse: no disk spent
		t.Fatal(err)
	}
	f.Close()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "POPPY_STATE_KEY=" + newKey()}
	r := runBinaryAt(t, work, 20*time.Second, env, "doctor", "--state-dir", filepath.Join(home, "state"))
	if r.code != 0 || !strings.Contains(r.stdout, "warning  Claude Code") || !strings.Contains(r.stdout, "not checked: it is larger than 16 MiB") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
