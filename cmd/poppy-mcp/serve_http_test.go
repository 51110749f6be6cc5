package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
)

// startLogged runs poppy-mcp with args until the test ends and returns the
// MCP URL it serves and everything it writes to stderr.
func startLogged(t *testing.T, env []string, args ...string) (string, *testlog.Buffer) {
	t.Helper()
	_, u, logged := startProcess(t, env, args...)
	return u, logged
}

// startProcess is startLogged that also returns the process, for a test
// that kills it.
func startProcess(t testing.TB, env []string, args ...string) (*exec.Cmd, string, *testlog.Buffer) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	logged := &testlog.Buffer{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(out, logged))
		for sc.Scan() {
			if m := servingURL.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return cmd, u, logged
	case <-time.After(30 * time.Second):
		t.Fatalf("poppy-mcp did not start serving HTTP: %s", logged.String())
		return nil, "", nil
	}
}

// initialize is an MCP initialize request.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// post sends an MCP initialize request to the MCP URL u with headers and
// returns the status.
func post(t *testing.T, u string, headers map[string]string) int {
	t.Helper()
	return postBody(t, u, initialize, headers)
}

// TestServeDefaultToken: MCP over HTTP on loopback needs a bearer token by
// default: serve makes one (256 bits) in the state directory, 0600, reuses
// it on the next start, and never writes it to stderr when stderr is not a
// terminal. The old code answered every local process without a token.
func TestServeDefaultToken(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	u, stderr := startLogged(t, nil, "serve", "--demo", "--state-dir", state, "--http", "127.0.0.1:0")
	path := filepath.Join(state, "http-token")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if fi, _ := os.Stat(path); len(token) < 43 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %d characters, mode %v", len(token), fi.Mode().Perm())
	}
	if code := post(t, u, nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := post(t, u, bearer(token)); code != http.StatusOK {
		t.Errorf("the token: %d, want 200", code)
	}
	mcpGoCall(t, u, "2025-11-25", bearer(token))
	if got := stderr.String(); strings.Contains(got, token) || !strings.Contains(got, path) {
		t.Errorf("stderr shows the token, or not where it is: %s", got)
	}
	u2, stderr2 := startLogged(t, nil, "serve", "--demo", "--state-dir", state, "--http", "127.0.0.1:0")
	if code := post(t, u2, bearer(token)); code != http.StatusOK || strings.Contains(stderr2.String(), token) {
		t.Errorf("the second start did not reuse the token: %d", code)
	}
	// POPPY_HTTP_TOKEN wins over the file.
	u3, _ := startLogged(t, []string{"POPPY_HTTP_TOKEN=from-the-environment-0123456789"}, "serve", "--demo", "--state-dir", state, "--http", "127.0.0.1:0")
	if post(t, u3, bearer(token)) != http.StatusUnauthorized || post(t, u3, bearer("from-the-environment-0123456789")) != http.StatusOK {
		t.Error("POPPY_HTTP_TOKEN did not win over the token file")
	}
}

// TestServeNoToken: --no-http-token opts out on loopback, and is refused
// where the server can be reached from elsewhere.
func TestServeNoToken(t *testing.T) {
	t.Parallel()
	u, _, _ := startHTTP(t, nil, "--demo", "--http", "127.0.0.1:0", "--no-http-token")
	if code := post(t, u, nil); code != http.StatusOK {
		t.Errorf("--no-http-token: %d, want 200", code)
	}
	for _, args := range [][]string{
		{"--http", "0.0.0.0:0", "--no-http-token"},
		{"--http", "127.0.0.1:0", "--no-http-token", "--public-url", "https://agent.test"},
		{"--http", "127.0.0.1:0", "--no-http-token", "--http-token", "t"},
	} {
		if _, errOut, code := runBinary(t, nil, append([]string{"serve", "--state-dir", t.TempDir()}, args...)...); code != 2 || !strings.Contains(errOut, "--no-http-token") {
			t.Errorf("%v: exit %d %s", args, code, errOut)
		}
	}
}

// TestServeOrigin: /mcp refuses a request whose Origin is present and not
// allowed with 403, even with the token (a browser page the user visits
// must not drive poppy-mcp); no Origin, the server's own origin and those
// of --allow-origin pass. The old code answered 200 to any Origin.
func TestServeOrigin(t *testing.T) {
	t.Parallel()
	env := []string{"POPPY_HTTP_TOKEN=origin-test-token"}
	u, _, _ := startHTTP(t, env, "--demo", "--http", "127.0.0.1:0", "--allow-origin", "https://App.Example")
	auth := bearer("origin-test-token")
	with := func(origin string) map[string]string {
		return map[string]string{"Authorization": auth["Authorization"], "Origin": origin}
	}
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/mcp"))
	for origin, want := range map[string]int{
		"":                          200,
		"https://evil.example":      403,
		"null":                      403,
		"http://127.0.0.1:" + port:  200,
		"http://localhost:" + port:  200,
		"https://app.example":       200,
		"https://app.example:8443":  403,
		"http://127.0.0.1:1":        403,
		"https://evil.example.test": 403,
	} {
		h := auth
		if origin != "" {
			h = with(origin)
		}
		if code := post(t, u, h); code != want {
			t.Errorf("Origin %q: %d, want %d", origin, code, want)
		}
	}
	if _, errOut, code := runBinary(t, nil, "serve", "--http", "127.0.0.1:0", "--allow-origin", "app.example/path"); code != 2 || !strings.Contains(errOut, "--allow-origin") {
		t.Errorf("a bad --allow-origin: exit %d %s", code, errOut)
	}
}
