package main

// Tests that run the built poppytest serve as a process, as a test suite
// in another language does: they use only what it prints and its admin API.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
)

// Binaries built once for the process tests.
var (
	poppytestBin string
	poppyMCPBin  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "poppytest-bin")
	if err != nil {
		panic(err)
	}
	poppytestBin, poppyMCPBin = filepath.Join(dir, "poppytest"), filepath.Join(dir, "poppy-mcp")
	for _, b := range []struct{ out, pkg string }{{poppytestBin, "."}, {poppyMCPBin, "../poppy-mcp"}} {
		if out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
			panic("go build " + b.pkg + ": " + err.Error() + "\n" + string(out))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// served is a poppytest serve process.
type served struct {
	cmd    *exec.Cmd
	in     instructions
	stdout *testlog.Buffer // after the instructions line
	stderr *testlog.Buffer
	done   chan struct{} // closed when the process has exited
	code   int
}

// startServe runs poppytest serve --json with args and reads its
// instructions; the process is killed when the test ends.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	s := &served{stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(poppytestBin, append([]string{"serve", "--json"}, args...)...)
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		rd := bufio.NewReader(out)
		line, _ := rd.ReadString('\n')
		first <- line
		_, _ = io.Copy(s.stdout, rd)
		err := s.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			s.code = exit.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	select {
	case line := <-first:
		if err := json.Unmarshal([]byte(line), &s.in); err != nil {
			t.Fatalf("the instructions %q: %v; stderr %s", line, err, s.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("poppytest serve printed nothing; stderr %s", s.stderr.String())
	}
	return s
}

// admin sends a JSON request to the admin API and decodes the answer into
// out (nil: ignored); it returns the status.
func (s *served) admin(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, strings.TrimSuffix(s.in.AdminURL, "/admin/")+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// stop asks the process to shut down and returns its exit code.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	if status := s.admin(t, "POST", "/admin/shutdown", nil, nil); status != http.StatusAccepted {
		t.Fatalf("shutdown: %d", status)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("poppytest serve did not stop")
	}
	return s.code
}

// violations returns the run's violations.
func (s *served) violations(t *testing.T, run string) []runViolation {
	t.Helper()
	var v struct {
		Violations []runViolation `json:"violations"`
	}
	if status := s.admin(t, "GET", "/admin/runs/"+run+"/violations", nil, &v); status != 200 {
		t.Fatalf("violations: %d", status)
	}
	return v.Violations
}

// TestServeProcess: the instructions name a CA file that exists while it
// runs and is removed on exit; a violation makes --fail-on-violation exit 1
// with a summary naming its section.
func TestServeProcess(t *testing.T) {
	s := startServe(t, "--fail-on-violation")
	if len(s.in.Runs) != 1 || s.in.Runs[0].Domain != "example.com" || len(s.in.Runs[0].Resolve) != 5 || len(s.in.Runs[0].Accounts) != 2 {
		t.Fatalf("instructions %+v", s.in)
	}
	if _, err := os.Stat(s.in.CAFile); err != nil {
		t.Fatal(err)
	}
	c := curlLike(t, s.in)
	resp, err := c.Get("https://api.example.com/poppy/whoami?access_token=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := s.stop(t); code != exitViolation {
		t.Errorf("exit %d, want %d; stderr %s", code, exitViolation, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "run default #1 §4.3") || !strings.Contains(s.stdout.String(), `"section":"4.3"`) {
		t.Errorf("the summary lacks the violation:\nstderr %s\nstdout %s", s.stderr.String(), s.stdout.String())
	}
	if _, err := os.Stat(s.in.CAFile); !os.IsNotExist(err) {
		t.Errorf("the CA file is still there: %v", err)
	}
}

// TestServeStartErrors: what stops serve from starting is one line on
// stderr, with the line of a scenario's mistake, and exit 2.
func TestServeStartErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("organization: X\napis:\n  - name: billing\n    operations: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--scenario", bad}, "line 4, apis[0].operations"},
		{[]string{"serve", "--addr", "0.0.0.0:8443"}, "not a loopback address"},
		{[]string{"serve", "--option", "no_nonce=maybe"}, "--option no_nonce"},
		{[]string{"serve", "--option", "nonsense=1"}, "NAME one of"},
		{[]string{"fly"}, "unknown command"},
	} {
		cmd := exec.Command(poppytestBin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: %v, stderr %q, want exit 2 with %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

// TestAgentFromItsOwnServer: with --agent-ca, a run bound to a client_id
// fetches the agent's documents from the agent's own server, whose
// certificate that CA issued, instead of having them registered.
func TestAgentFromItsOwnServer(t *testing.T) {
	var a *miniAgent
	var fetched atomic.Int32
	own := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		docs := a.docs()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/jwks.json" {
			w.Write(docs.JWKS)
			return
		}
		w.Write(docs.Client)
	}))
	defer own.Close()
	ca := filepath.Join(t.TempDir(), "agent-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: own.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--agent-ca", ca)
	a = newMiniAgent(t, s, own.URL+"/agent.json", "own.poppytest.test")
	if status := s.admin(t, "POST", "/admin/runs", map[string]any{"name": "own", "client_id": a.id}, nil); status != 201 {
		t.Fatalf("creating the run: %d", status)
	}
	a.startSession()
	if fetched.Load() != 2 {
		t.Errorf("the agent's server was asked %d times, want 2 (agent.json, jwks.json)", fetched.Load())
	}
	if v := s.violations(t, "own"); len(v) != 0 {
		t.Errorf("violations %+v", v)
	}
}
