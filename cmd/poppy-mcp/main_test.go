package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/browser"
	"github.com/poppy-mcp/poppy-mcp/internal/testparallel"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// binary is poppy-mcp built once for the process tests.
var binary string

func TestMain(m *testing.M) {
	testparallel.Set() // the tests mostly wait on child processes
	dir, err := os.MkdirTemp("", "poppy-mcp-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "poppy-mcp")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runBinary runs poppy-mcp and returns stdout, stderr and the exit code.
func runBinary(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runBinaryIn(t, env, "", args...)
}

// runBinaryIn is runBinary with stdin.
func runBinaryIn(t testing.TB, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	default:
		t.Fatalf("running poppy-mcp: %v", err)
		return "", "", -1
	}
}

// companyArgs are the environment and --resolve flags that reach a poppytest
// Company from another process under its real names.
func companyArgs(t testing.TB, srv *poppytest.Server) ([]string, []string) {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, h := range srv.Hosts() {
		args = append(args, "--resolve", h+":443:"+srv.Addr())
	}
	return []string{"SSL_CERT_FILE=" + ca}, args
}

func TestCheckClean(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, args := companyArgs(t, srv)
	out, errOut, code := runBinary(t, env, append(append([]string{"check", "--json"}, args...), "example.com")...)
	if code != 0 {
		t.Fatalf("exit %d, stdout %s stderr %s", code, out, errOut)
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if !rep.OK || rep.Domain != "example.com" || len(rep.Findings) != 0 {
		t.Errorf("report = %+v", rep)
	}
	if srv.Count("auth.example.com", "/oauth/token") != 0 {
		t.Error("check signed in: it must read only public documents")
	}
}

func TestCheckErrors(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, &poppytest.Options{
		Metadata: func(m map[string]any) { m["poppy_domains"] = []any{"example.org"} },
	})
	env, args := companyArgs(t, srv)
	out, _, code := runBinary(t, env, append([]string{"check", "example.com"}, args...)...)
	if code != 1 {
		t.Fatalf("exit %d, want 1; output %s", code, out)
	}
	if !strings.Contains(out, "error   §3.2") || !strings.Contains(out, "NOT usable") {
		t.Errorf("output:\n%s", out)
	}
	out, _, code = runBinary(t, env, append(append([]string{"check", "--json"}, args...), "example.com")...)
	var rep checkReport
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.OK || rep.Findings[0].Section != "3.2" {
		t.Errorf("json exit %d: %s", code, out)
	}
}

// TestCheckSkippedErrors: a misnamed extension is the Company's error, so
// check reports it and exits 1, but poppy-mcp ignores extensions it does
// not support (Poppy 0.1 §3.3), so the Company stays usable.
func TestCheckSkippedErrors(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, &poppytest.Options{PoppyJSON: func(d map[string]any) {
		d["extensions"] = map[string]any{"gift-wrap": map[string]any{"version": "1"}}
	}})
	env, args := companyArgs(t, srv)
	out, _, code := runBinary(t, env, append([]string{"check", "example.com"}, args...)...)
	if code != 1 || !strings.Contains(out, "does not block use") || !strings.Contains(out, "usable (the errors are in parts poppy-mcp skips)") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	out, _, code = runBinary(t, env, append(append([]string{"check", "--json"}, args...), "example.com")...)
	var rep checkReport
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.OK || !rep.Usable || rep.Findings[0].BlocksUse {
		t.Errorf("json exit %d: %s", code, out)
	}
}

// TestCheckRefusesLocalAddress: a domain that is an IP literal on loopback
// (here poppytest's own listener, which serves a valid certificate for
// 127.0.0.1) is refused at dial time: nothing reaches it, and the error
// says only that the address is not public. (TestCheckClean reaches the
// same listener under names mapped with --resolve, the explicit escape hatch.)
func TestCheckRefusesLocalAddress(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, _ := companyArgs(t, srv)
	out, errOut, code := runBinary(t, env, "check", "--json", srv.Addr())
	var rep checkReport
	if code != 2 || json.Unmarshal([]byte(out), &rep) != nil || !strings.Contains(rep.Error, "refused: the address is not public") {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the local listener got %d requests", n)
	}
}

func TestCheckCouldNotCheck(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, _ := companyArgs(t, srv)
	// Port 1 on loopback: connection refused.
	out, errOut, code := runBinary(t, env, "check", "--json", "--resolve", "example.com:443:127.0.0.1:1", "example.com")
	var rep checkReport
	if code != 2 || json.Unmarshal([]byte(out), &rep) != nil || rep.OK || rep.Error == "" {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if _, _, code := runBinary(t, nil, "check"); code != 2 {
		t.Errorf("check without a domain: exit %d, want 2", code)
	}
	if _, _, code := runBinary(t, nil, "check", "http://example.com"); code != 2 {
		t.Errorf("check of an http URL: exit %d, want 2", code)
	}
}

// TestServeStdio drives `serve --demo` as a subprocess with the official
// go-sdk client at both MCP revisions.
func TestServeStdio(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.Command(binary, "serve", "--demo", "--state-dir", t.TempDir())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "discover_company", Arguments: map[string]any{"domain": demoDomain}})
			if err != nil || res.IsError {
				t.Fatalf("discover_company: %v %+v\nstderr: %s", err, res, stderr.String())
			}
			text := res.Content[0].(*sdk.TextContent).Text
			if !strings.Contains(text, "speaks Poppy") {
				t.Errorf("text = %q", text)
			}
		})
	}
}

// TestServeDemoBrowser: with --browser, serve's Chromium reaches the demo
// Company through the network guard's proxy, with the demo's names mapped
// and poppy-mcp's own join page allowed, and lands on the page in the
// Session. (tools' hostile rows show that the same proxy refuses the rest.)
func TestServeDemoBrowser(t *testing.T) {
	t.Parallel()
	path, err := browser.Find()
	if err != nil {
		if os.Getenv("POPPY_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("%v, and POPPY_REQUIRE_CHROMIUM=1", err)
		}
		t.Skipf("%v: skipping", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(binary, "serve", "--demo", "--browser", path, "--state-dir", t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "browse_page", Arguments: map[string]any{"domain": demoDomain, "url": "/orders"}})
	if err != nil || res.IsError {
		t.Fatalf("browse_page: %v %+v\nstderr: %s", err, res, stderr.String())
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, "https://"+demoDomain+"/orders") {
		t.Errorf("browse_page: %q", text)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	out, errOut, code := runBinary(t, nil, "demo", "--state-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"speaks Poppy",                    // discovery
		"is open, signed out",             // a Session
		"authorization: sign_in_required", // the Company Agent asks for the account
		"sign-in with demo.poppy.example: complete",
		"is delivered",                 // the conversation continues signed in
		"company_person",               // handoff: a person wrote
		"listOrders answered HTTP 200", // OpenAPI call, signed in
		"products match",               // relayed MCP tool
		"/p/",                          // the website join page
		"Account Token was revoked",    // sign-out
		"no protocol violation",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	if out, _, code := runBinary(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "poppy-mcp ") {
		t.Errorf("version: %d %q", code, out)
	}
	if _, _, code := runBinary(t, nil, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

func TestResolveFlag(t *testing.T) {
	t.Parallel()
	var r resolveFlag
	for _, v := range []string{"example.com:443:127.0.0.1", "auth.example.com:443:127.0.0.1:8443", "x.example:443:[::1]"} {
		if err := r.Set(v); err != nil {
			t.Errorf("Set(%q): %v", v, err)
		}
	}
	want := map[string]string{"example.com:443": "127.0.0.1:443", "auth.example.com:443": "127.0.0.1:8443", "x.example:443": "[::1]:443"}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("r[%q] = %q, want %q", k, r[k], v)
		}
	}
	for _, bad := range []string{"example.com", "example.com:443", "example.com:x:127.0.0.1", "example.com:443:not-an-ip"} {
		if err := r.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

func TestInit(t *testing.T) {
	t.Parallel()
	state, out := t.TempDir(), t.TempDir()
	env := []string{"POPPY_STATE_KEY=" + strings.Repeat("A", 43)}
	args := []string{"init", "--state-dir", state, "--out", out, "--client-id", "https://agent.example/agent.json",
		"--redirect-uri", "https://agent.example/oauth/callback"}
	stdout, errOut, code := runBinary(t, env, args...)
	if code != 0 {
		t.Fatalf("init: exit %d: %s %s", code, stdout, errOut)
	}
	var agent struct {
		ClientID     string   `json:"client_id"`
		JWKSURI      string   `json:"jwks_uri"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	readJSON(t, filepath.Join(out, "agent.json"), &agent)
	if agent.ClientID != "https://agent.example/agent.json" || agent.JWKSURI != "https://agent.example/jwks.json" ||
		agent.AuthMethod != "private_key_jwt" || len(agent.RedirectURIs) != 1 {
		t.Errorf("agent.json = %+v", agent)
	}
	first := jwkIDs(t, out)
	if len(first) != 1 {
		t.Fatalf("jwks.json has %d keys", len(first))
	}
	if _, _, code := runBinary(t, env, args...); code != 0 || jwkIDs(t, out)[0] != first[0] {
		t.Error("re-running init changed the key")
	}
	if _, _, code := runBinary(t, env, append(args, "--rotate")...); code != 0 || len(jwkIDs(t, out)) != 2 {
		t.Error("--rotate did not publish the new key beside the old one")
	}
	for _, bad := range [][]string{
		{"init", "--state-dir", state, "--client-id", "http://agent.example/agent.json"},
		{"init", "--state-dir", state, "--client-id", "https://agent.example/agent.json", "--redirect-uri", "https://evil.example/cb"},
		{"init", "--state-dir", state},
	} {
		if _, _, code := runBinary(t, env, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// jwkIDs returns the kids in jwks.json and fails if any key is private.
func jwkIDs(t *testing.T, dir string) []string {
	t.Helper()
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	readJSON(t, filepath.Join(dir, "jwks.json"), &set)
	var ids []string
	for _, k := range set.Keys {
		if _, private := k["d"]; private {
			t.Fatal("jwks.json holds a private key")
		}
		ids = append(ids, k["kid"].(string))
	}
	return ids
}

// TestServeWithoutKey: --client-id without `init` must not invent an
// unpublished key; discovery still works and start_session says what to run.
func TestServeWithoutKey(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, resolve := companyArgs(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"serve", "--state-dir", t.TempDir(), "--client-id", "https://agent.example/agent.json"}, resolve...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), env...), "POPPY_STATE_KEY="+strings.Repeat("A", 43))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "discover_company", Arguments: map[string]any{"domain": "example.com"}})
	if err != nil || res.IsError {
		t.Fatalf("discover_company without identity: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "start_session", Arguments: map[string]any{"domain": "example.com"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "poppy-mcp init") {
		t.Fatalf("start_session without a key: %v %+v", err, res)
	}
	if n := srv.Count("auth.example.com", "/oauth/token"); n != 0 {
		t.Errorf("%d token requests with an unpublished key", n)
	}
	cs.Close()
	cmd.Wait()
	if !strings.Contains(stderr.String(), "run `poppy-mcp init") {
		t.Errorf("stderr does not say what to run: %s", stderr.String())
	}
}

// TestFirstSentence: the demo lists each tool with the first sentence of
// its description, which may hold "e.g." before it ends. The old cut
// stopped at the first ". " and showed start_direct_conversation as
// "... linked to an agent conversation (e.g.".
func TestFirstSentence(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Let the user talk with the Company themselves, linked to an agent conversation (e.g. after the Company asked for the user). " +
			"text is the user's own first message.": "Let the user talk with the Company themselves, linked to an agent conversation (e.g. after the Company asked for the user).",
		"One sentence. Two.":             "One sentence.",
		"No full stop and a space here.": "No full stop and a space here.",
		"Pick one, i.e. the first. Then": "Pick one, i.e. the first.",
		"Wait for the fridge. Then go.":  "Wait for the fridge.",
		"":                               "",
	} {
		if got := firstSentence(in); got != want {
			t.Errorf("firstSentence(%q) = %q, want %q", in, got, want)
		}
	}
}
