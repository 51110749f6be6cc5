package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestResolveWildcard: --resolve takes *.example.com for every name under
// example.com, at any depth, and not example.com itself (curl knows only a
// bare *, which is refused: it would take every name past the network
// guard). An exact entry wins over a wildcard, a longer wildcard over a
// shorter. Before, *.example.com was stored as a name no host has, and
// every Company host needed an entry of its own.
func TestResolveWildcard(t *testing.T) {
	t.Parallel()
	var r resolveFlag
	for _, v := range []string{"*.example.com:443:127.0.0.1:8443", "*.shop.example.com:443:127.0.0.2", "api.example.com:443:127.0.0.3", "*.Example.org:8443:[::1]"} {
		if err := r.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	for hostport, want := range map[string]string{
		"auth.example.com:443":       "127.0.0.1:8443",
		"a.b.example.com:443":        "127.0.0.1:8443",
		"mcp.shop.example.com:443":   "127.0.0.2:443",
		"api.example.com:443":        "127.0.0.3:443",
		"WWW.EXAMPLE.ORG:8443":       "[::1]:8443",
		"example.com:443":            "", // the apex is not under the wildcard: give it too
		"auth.example.com:8443":      "", // another port
		"notexample.com:443":         "",
		"auth.example.com.evil:443":  "",
		"shop.example.com.test:443":  "",
		"127.0.0.1:443":              "",
		"www.example.org.attack:443": "",
	} {
		if got, ok := r.lookup(hostport); got != want || ok != (want != "") {
			t.Errorf("lookup(%q) = %q, %v; want %q", hostport, got, ok, want)
		}
	}
	for _, bad := range []string{"*:443:127.0.0.1", "*.com:443:127.0.0.1", "a.*.example.com:443:127.0.0.1", "*.*.example.com:443:127.0.0.1",
		"*.example.:443:127.0.0.1", "*.0.0.1:443:127.0.0.1", "ex*ample.com:443:127.0.0.1"} {
		if err := r.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

// TestResolveWildcardReachesCompany: two entries, the domain and its
// wildcard, reach every host of a Company (poppy.json at the domain, the
// OAuth metadata at auth., the MCP server's at mcp.). Before, `check` could
// not connect to auth.example.com with these two.
func TestResolveWildcardReachesCompany(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, _ := companyArgs(t, srv)
	out, errOut, code := runBinary(t, env, "check", "--json", "--resolve", "example.com:443:"+srv.Addr(),
		"--resolve", "*.example.com:443:"+srv.Addr(), "example.com")
	var rep checkReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if srv.Count("auth.example.com", "/.well-known/oauth-authorization-server") == 0 {
		t.Error("check did not reach auth.example.com through the wildcard")
	}
}

// TestPagesAddrLoopbackOnly: --pages-addr off loopback is refused at once
// (pages would be handed out as http://[::]:PORT/... links, open to the
// network); loopback addresses are taken.
func TestPagesAddrLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8809", "[::]:8809", ":8809", "192.0.2.1:8809", "example.com:8809"} {
		if _, err := parseServe([]string{"--pages-addr", addr}, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback only") {
			t.Errorf("--pages-addr %s: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8809", "[::1]:8809", "localhost:8809"} {
		if _, err := parseServe([]string{"--pages-addr", addr}, io.Discard); err != nil {
			t.Errorf("--pages-addr %s refused: %v", addr, err)
		}
	}
}

// TestHTTPTokenOverStdioWarns: --http-token over stdio starts, with a
// warning that it is ignored, and the warning does not show the token.
func TestHTTPTokenOverStdioWarns(t *testing.T) {
	t.Parallel()
	const token = "a-token-given-to-stdio-by-mistake"
	_, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY=" + newKey()}, "serve", "--state-dir", t.TempDir(), "--http-token", token)
	if code != 0 || !strings.Contains(errOut, "--http-token applies to HTTP mode (--http) only: ignored over stdio") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if strings.Contains(errOut, token) {
		t.Errorf("the warning shows the token:\n%s", errOut)
	}
}

// TestBrowserPathCheckedAtStart: a --browser that cannot be run stops serve
// at start, in one line that says why and what to give. Before, serve
// started, and the first browse_page failed with "Try again later".
func TestBrowserPathCheckedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "chromium")
	if err := os.WriteFile(plain, []byte("not a program"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, why := range map[string]string{
		filepath.Join(dir, "nonexistent"): "does not exist",
		plain:                             "is not an executable file",
		dir:                               "is a directory",
		"no-such-chromium-on-path":        "is not found on PATH",
	} {
		_, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY=" + newKey()}, "serve", "--state-dir", t.TempDir(), "--browser", path)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "poppy-mcp serve: --browser "+path+" "+why) ||
			!strings.Contains(lines[0], "--browser auto") {
			t.Errorf("--browser %s: exit %d, stderr:\n%s", path, code, errOut)
		}
	}
}
