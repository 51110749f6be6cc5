package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/doctor"
	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/person"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// binaryRun is one run of the built binary.
type binaryRun struct {
	stdout, stderr string
	code           int
	state          *os.ProcessState // its resource use: SysUsage
}

// runBinaryAt runs poppy-mcp in dir, killed after limit (a test failure),
// and returns what it printed and how it ended.
func runBinaryAt(t *testing.T, dir string, limit time.Duration, env []string, args ...string) binaryRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("poppy-mcp %v did not end within %v", args, limit)
	}
	return binaryRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode(), state: cmd.ProcessState}
}

// TestDoctorDialects: each configuration is read as its assistant reads
// it, and doctor says which: strict JSON for Cursor (a trailing comma there
// is an error, as Cursor refuses the file), JSONC for VS Code; and "2
// poppy-mcp entries", not "entrys".
func TestDoctorDialects(t *testing.T) {
	t.Parallel()
	home, work := t.TempDir(), t.TempDir()
	mkdirs(t, filepath.Join(work, ".cursor"), filepath.Join(work, ".vscode"))
	bin := jsonString(binary)
	writeFile(t, filepath.Join(work, ".cursor", "mcp.json"), `{"mcpServers": {"poppy": {"command": `+bin+`, "args": ["serve"]},}}`)
	writeFile(t, filepath.Join(work, ".vscode", "mcp.json"), `{"servers": {
		"poppy": {"command": `+bin+`, "args": ["serve"]}, // the default
		"poppy-demo": {"command": `+bin+`, "args": ["serve", "--demo"],},
	}}`)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "POPPY_STATE_KEY=" + newKey()}
	state := filepath.Join(home, "state")
	r := runBinaryAt(t, work, time.Minute, env, "doctor", "--json", "--state-dir", state)
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Configs) != 2 {
		t.Fatalf("doctor --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	cursor, vscode := rep.Configs[0], rep.Configs[1]
	if cursor.Dialect != doctor.DialectJSON || cursor.Status != statusError || !strings.Contains(cursor.Message, "comments or trailing commas, which Cursor refuses") {
		t.Errorf("Cursor's mcp.json with a trailing comma: %+v", cursor)
	}
	if vscode.Dialect != doctor.DialectJSONC || vscode.Status != statusOK || len(vscode.Entries) != 2 {
		t.Errorf("VS Code's mcp.json with comments and trailing commas: %+v", vscode)
	}
	r = runBinaryAt(t, work, time.Minute, env, "doctor", "--state-dir", state)
	if !strings.Contains(r.stdout, "(JSONC): 2 poppy-mcp entries") {
		t.Errorf("doctor:\n%s", r.stdout)
	}
}

// TestFlagsBeforeCommand: `poppy-mcp --state-dir D status` runs status
// (before, it was read as serve and refused), `--json` may come first
// too, and no command word is still serve.
func TestFlagsBeforeCommand(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := []string{"POPPY_STATE_KEY=" + newKey()}
	if _, errOut, code := runBinary(t, env, "init", "--state-dir", state, "--out", t.TempDir(), "--client-id", "https://agent.example/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	out, errOut, code := runBinary(t, env, "--state-dir", state, "status", "--offline")
	if code != 0 || !strings.Contains(out, "Identity https://agent.example/agent.json") {
		t.Errorf("--state-dir D status: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runBinary(t, env, "--json", "--state-dir="+state, "status", "--offline")
	var rep person.StatusReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Identity == nil {
		t.Errorf("--json --state-dir=D status: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	// No command word: serve, which refuses --public-url without --http.
	_, errOut, code = runBinary(t, env, "--state-dir", state, "--public-url", "https://agent.example")
	if code != 2 || !strings.Contains(errOut, "--public-url needs --http") {
		t.Errorf("flags alone are serve's: exit %d, %s", code, errOut)
	}
}

// TestCommandLine: which words are the command, with flags before it.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args, want []string // want: the command, then its arguments
	}{
		{nil, []string{"serve"}},
		{[]string{"--demo"}, []string{"serve", "--demo"}},
		{[]string{"status"}, []string{"status"}},
		{[]string{"--state-dir", "D", "status", "--json"}, []string{"status", "--state-dir", "D", "--json"}},
		{[]string{"--state-dir=D", "--json", "doctor"}, []string{"doctor", "--state-dir=D", "--json"}},
		{[]string{"--log-level", "debug", "--http", ":8808"}, []string{"serve", "--log-level", "debug", "--http", ":8808"}},
		{[]string{"--no-such-flag", "status"}, []string{"serve", "--no-such-flag", "status"}},
		{[]string{"--json", "--", "status"}, []string{"serve", "--json", "--", "status"}},
		{[]string{"--state-dir", "D", "stauts"}, []string{"stauts", "--state-dir", "D"}},
	} {
		name, rest := commandLine(tc.args)
		if got := append([]string{name}, rest...); !slices.Equal(got, tc.want) {
			t.Errorf("commandLine(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestMistyped: a mistyped command, or a mistyped flag of a command or of
// serve, is one line on stderr naming the nearest, with exit status 2.
func TestMistyped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `did you mean "status"?`},
		{[]string{"--state-dir", t.TempDir(), "doctr"}, `did you mean "doctor"?`},
		{[]string{"help", "sign-otu"}, `did you mean "sign-out"?`},
		{[]string{"status", "--stat-dir", "D"}, "did you mean --state-dir?"},
		{[]string{"--stat-dir", "D"}, "did you mean --state-dir?"},
		{[]string{"check", "--liev", "example.com"}, "did you mean --live?"},
	} {
		out, errOut, code := runBinary(t, nil, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, errOut, _ := runBinary(t, nil, "frobnicate"); strings.Contains(errOut, "did you mean") {
		t.Errorf("frobnicate is near no command: %q", errOut)
	}
}

// TestStatusMakesNoState: status on a state directory that does not exist
// says so, and makes neither the directory nor a key. Before, it made the
// directory, an empty database and a state.key, and reported them.
func TestStatusMakesNoState(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "none")
	out, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY="}, "status", "--state-dir", dir)
	if code != 1 || out != "" || !strings.Contains(errOut, "no state in "+dir) || !strings.Contains(errOut, "status made nothing") {
		t.Errorf("status on no state: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("status made %s: %v", dir, err)
	}
}

// TestLiveLines: check --live says a warning that several probes repeat
// once, with their count and IDs; errors stay one line each.
func TestLiveLines(t *testing.T) {
	t.Parallel()
	advice := "§4.3 names invalid_dpop_proof for a failed proof check"
	checks := []livecheck.Check{
		{ID: "refuse.proof_htm", Section: "4.3", Status: livecheck.Warned, Message: "refused a proof for POST with invalid_token; " + advice},
		{ID: "session.start", Section: "4.2", Status: livecheck.Passed, Message: "a Session starts"},
		{ID: "refuse.proof_htu", Section: "4.3", Status: livecheck.Warned, Message: "refused a proof for another URL with invalid_token; " + advice},
		{ID: "refuse.proof_key", Section: "4.3", Status: livecheck.Warned, Message: "refused a proof by another key with invalid_token; " + advice},
		{ID: "a.fail", Section: "4.3", Status: livecheck.Failed, Message: "same; words"},
		{ID: "b.fail", Section: "4.3", Status: livecheck.Failed, Message: "same; words"},
	}
	var b bytes.Buffer
	printLive(&b, liveReport{Domain: "example.com", Usable: true, Checks: checks, Requests: 9, MaxRequests: 100})
	out := b.String()
	if n := strings.Count(out, advice); n != 1 {
		t.Errorf("the repeated warning is said %d times:\n%s", n, out)
	}
	for _, want := range []string{advice + " (3 probes) [refuse.proof_htm, refuse.proof_htu, refuse.proof_key]", "[a.fail]", "[b.fail]",
		"2 error(s), 3 warning(s), 1 ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestPostgresAdvice: a state in PostgreSQL gets PostgreSQL's advice, and
// the setting is named as what it is. Before, a bad POPPY_STORE was called
// "--store", a PostgreSQL that did not answer was told to check "the
// directory's permissions and free space", and a missing signing key was
// to be made "with the same state directory".
func TestPostgresAdvice(t *testing.T) {
	t.Parallel()
	key := newKey()
	for name, tc := range map[string]struct {
		env, args, want []string
	}{
		"POPPY_STORE not PostgreSQL": {[]string{"POPPY_STORE=mysql://u@db.test/poppy"}, nil,
			[]string{"the environment variable POPPY_STORE must be a postgres:// URL", "unset POPPY_STORE"}},
		"--store not PostgreSQL": {nil, []string{"--store", "mysql://u@db.test/poppy"},
			[]string{"the flag --store must be a postgres:// URL", "leave --store out"}},
		"PostgreSQL not answering": {nil, []string{"--store", "postgres://u@127.0.0.1:1/poppy"},
			[]string{"connection refused", "check that PostgreSQL is running and reachable", "PGPASSWORD", "--store (or POPPY_STORE)"}},
	} {
		_, errOut, code := runBinary(t, append([]string{"POPPY_STATE_KEY=" + key}, tc.env...), append([]string{"status"}, tc.args...)...)
		if code != 1 || strings.Contains(errOut, "free space") || strings.Contains(errOut, "--state-dir to start afresh") {
			t.Errorf("%s: exit %d, %s", name, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: %q does not say %q", name, errOut, w)
			}
		}
	}
	srv := poppytest.NewServer(t, nil)
	text, _, _ := startSessionText(t, srv, key, "--store", postgresURL(t), "--client-id", "https://agent.example/agent.json")
	if !strings.Contains(text, "has no signing key for it") || !strings.Contains(text, "with the same --store (or POPPY_STORE)") ||
		!strings.Contains(text, "the flag --client-id names") || strings.Contains(text, "state directory") {
		t.Errorf("no signing key in PostgreSQL: %s", text)
	}
}
