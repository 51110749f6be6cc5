package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/person"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// person is a poppytest Company, a state directory whose identity (made by
// `init`) the Company can fetch, and the environment and flags that reach
// the Company from poppy-mcp processes.
type testPerson struct {
	srv   *poppytest.Server
	env   []string
	flags []string // --state-dir and --resolve
	state string
}

// newPerson starts the Company and runs init.
func newPerson(t *testing.T, opts *poppytest.Options) *testPerson {
	t.Helper()
	if opts == nil {
		opts = &poppytest.Options{}
	}
	if opts.DeviceInterval == 0 {
		opts.DeviceInterval = time.Second
	}
	srv := poppytest.NewServer(t, opts)
	env, resolve := companyArgs(t, srv)
	p := &testPerson{srv: srv, env: append(env, "POPPY_STATE_KEY="+newKey()), state: t.TempDir()}
	p.flags = append([]string{"--state-dir", p.state}, resolve...)
	out := t.TempDir()
	if _, errOut, code := runBinary(t, p.env, "init", "--state-dir", p.state, "--out", out,
		"--client-id", "https://"+srv.AgentHost()+"/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	srv.SetAgentDocuments(readFile(t, filepath.Join(out, "agent.json")), readFile(t, filepath.Join(out, "jwks.json")))
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run runs a command of poppy-mcp with the person's flags after its
// arguments, and stdin.
func (p *testPerson) run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runBinaryIn(t, p.env, stdin, append(args, p.flags...)...)
}

// serve starts `poppy-mcp serve` over stdio on the person's state and
// connects the go-sdk client to it. Its stderr is returned.
func (p *testPerson) serve(t *testing.T) (*sdk.ClientSession, *testlog.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(binary, append([]string{"serve"}, p.flags...)...)
	cmd.Env = append(os.Environ(), p.env...)
	stderr := &testlog.Buffer{}
	cmd.Stderr = stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// call calls a tool and returns the result and its text.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return res, text.String()
}

// signIn signs the person in through the running serve's tools, by device,
// approved at the Company as acct_dana.
func (p *testPerson) signIn(t *testing.T, cs *sdk.ClientSession, scopes ...string) {
	t.Helper()
	m := callTool(t, cs, "sign_in_device", map[string]any{"domain": "example.com", "scopes": scopes})
	code, _ := m["user_code"].(string)
	if code == "" {
		t.Fatalf("sign_in_device gave no user_code: %v", m)
	}
	if err := p.srv.ApproveDevice(code, "acct_dana"); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		m = callTool(t, cs, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 10})
		if m["status"] != "pending" {
			break
		}
	}
	if m["status"] != "complete" {
		t.Fatalf("sign-in: %v", m)
	}
}

// noSecrets fails when any secret the Company issued shows in text.
func (p *testPerson) noSecrets(t *testing.T, text string) {
	t.Helper()
	for _, s := range p.srv.IssuedSecrets() {
		if len(s) >= 6 && strings.Contains(text, s) {
			t.Errorf("a secret the Company issued shows: %.8s…", s)
		}
	}
}

// TestSignOutWhileServing: after `poppy-mcp sign-out` in another process,
// the running serve's next call_api is sent signed out and says why. The
// Company leaves tokens issued before a sign-out signed in (LateSignOut,
// as Poppy 0.1 §4.9 allows), so a serve that did not notice would still
// read the user's orders after the user signed out.
func TestSignOutWhileServing(t *testing.T) {
	t.Parallel()
	p := newPerson(t, &poppytest.Options{LateSignOut: true})
	cs, stderr := p.serve(t)
	p.signIn(t, cs, "poppy:read")
	listOrders := map[string]any{"domain": "example.com", "operation": "listOrders"}
	if res, text := call(t, cs, "call_api", listOrders); res.IsError || !strings.Contains(text, "200") {
		t.Fatalf("call_api signed in: %s", text)
	}
	out, errOut, code := p.run(t, "", "sign-out", "example.com")
	if code != 0 || !strings.Contains(out, "Signed out of example.com") || !strings.Contains(out, "revoked") {
		t.Fatalf("sign-out: exit %d\n%s%s", code, out, errOut)
	}
	if n := p.srv.Served("revoked"); n != 1 {
		t.Errorf("the Company revoked %d tokens, want 1", n)
	}
	res, text := call(t, cs, "call_api", listOrders)
	if !res.IsError || !strings.Contains(text, "sign_in_required") || !strings.Contains(text, "outside this conversation") {
		t.Errorf("call_api after sign-out: isError %v, %q; want sign_in_required saying the user signed out", res.IsError, text)
	}
	p.noSecrets(t, out+errOut+text+stderr.String())

	// Nothing left to revoke: said so, exit 0.
	out, _, code = p.run(t, "", "sign-out", "--json", "example.com")
	var rep person.SignOutReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Held || rep.Issuer != p.srv.Issuer() {
		t.Errorf("sign-out again: exit %d %s", code, out)
	}
}

// TestSignOutRevocationFails: a revocation the Company refuses is
// reported and deletes nothing; with --yes the token is deleted anyway,
// and said to be still valid at the Company.
func TestSignOutRevocationFails(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	cs, _ := p.serve(t)
	p.signIn(t, cs, "poppy:read")
	cs.Close()
	p.srv.HandleFunc("auth.example.com", "POST /oauth/revoke", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	})
	out, errOut, code := p.run(t, "", "sign-out", "example.com")
	if code != 1 || !strings.Contains(errOut, "could not revoke") || !strings.Contains(out, "Nothing was deleted") {
		t.Fatalf("sign-out with revocation refused: exit %d\n%s%s", code, out, errOut)
	}
	if st := p.status(t); !st.Companies[0].SignedIn {
		t.Error("a failed sign-out deleted the Account Token")
	}
	out, errOut, code = p.run(t, "", "sign-out", "--yes", "--json", "example.com")
	var rep person.SignOutReport
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Revoked || !rep.Deleted || rep.Error == "" {
		t.Fatalf("sign-out --yes: exit %d\n%s%s", code, out, errOut)
	}
	if st := p.status(t); st.Companies[0].SignedIn || st.Companies[0].AccountToken != nil || st.Companies[0].Sessions[0].SignedIn {
		t.Errorf("after sign-out --yes: %+v", st.Companies[0])
	}
}

// status runs `status --json --offline`.
func (p *testPerson) status(t *testing.T) person.StatusReport {
	t.Helper()
	out, errOut, code := p.run(t, "", "status", "--json", "--offline")
	var rep person.StatusReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	return rep
}

// TestStatus: status shows the identity with its published documents
// compared, and the Company with its sign-in, Sessions and conversations,
// and never a secret.
func TestStatus(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	if st := p.status(t); len(st.Companies) != 0 || st.Identity == nil || len(st.Identity.Keys) != 1 {
		t.Fatalf("status before any Company: %+v", st)
	}
	cs, _ := p.serve(t)
	p.signIn(t, cs, "poppy:read")
	if res, text := call(t, cs, "send_message", map[string]any{"domain": "example.com", "text": "Where is order 1042?"}); res.IsError {
		t.Fatalf("send_message: %s", text)
	}
	out, errOut, code := p.run(t, "", "status", "--json")
	var rep person.StatusReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	if id := rep.Identity; id == nil || id.ClientID != "https://agent.example/agent.json" || id.Published == nil || !id.Published.OK() || !id.Keys[0].Signing {
		t.Errorf("identity = %+v", rep.Identity)
	}
	if len(rep.Companies) != 1 {
		t.Fatalf("companies = %+v", rep.Companies)
	}
	c := rep.Companies[0]
	if c.Issuer != p.srv.Issuer() || !c.SignedIn || strings.Join(c.Scopes, " ") != "poppy:read" || c.AccountToken == nil ||
		c.AccountToken.LastUsed.IsZero() || len(c.Sessions) != 1 || c.Open != 1 || strings.Join(c.Domains, ",") != "example.com" {
		t.Errorf("company = %+v", c)
	}
	human, _, code := p.run(t, "", "status")
	for _, want := range []string{"Identity https://agent.example/agent.json", "signing", "agent.json", "the same as the state's",
		"example.com", p.srv.Issuer(), "poppy:read", "just now"} {
		if !strings.Contains(human, want) {
			t.Errorf("status lacks %q:\n%s", want, human)
		}
	}
	if strings.Contains(human, "\x1b[") {
		t.Error("status is coloured on a pipe")
	}
	p.noSecrets(t, out+human+errOut)
}

// TestForgetWhileServing: forget asks first (no answer, nothing changes),
// revokes the Account Token, deletes everything held for the Company, and
// the running serve's next use of it starts a new Session for a new User.
func TestForgetWhileServing(t *testing.T) {
	t.Parallel()
	p := newPerson(t, &poppytest.Options{OtherDomains: []string{"example.co.uk"}})
	cs, _ := p.serve(t)
	p.signIn(t, cs, "poppy:read")
	if res, text := call(t, cs, "send_message", map[string]any{"domain": "example.com", "text": "Where is order 1042?"}); res.IsError {
		t.Fatalf("send_message: %s", text)
	}
	before := p.srv.Sessions()
	out, errOut, code := p.run(t, "n\n", "forget", "example.com")
	if code != 1 || !strings.Contains(errOut, "Forget example.com?") || !strings.Contains(errOut, "example.co.uk") ||
		!strings.Contains(errOut, "nothing was changed") {
		t.Fatalf("forget, declined: exit %d\n%s%s", code, out, errOut)
	}
	if st := p.status(t); len(st.Companies) != 1 || !st.Companies[0].SignedIn {
		t.Fatal("a declined forget changed something")
	}
	out, errOut, code = p.run(t, "y\n", "forget", "example.com")
	if code != 0 || !strings.Contains(out, "Forgot example.com") || !strings.Contains(out, "example.co.uk") ||
		!strings.Contains(out, "the Account Token (revoked)") {
		t.Fatalf("forget: exit %d\n%s%s", code, out, errOut)
	}
	if st := p.status(t); len(st.Companies) != 0 {
		t.Errorf("status after forget: %+v", st.Companies)
	}
	if n := p.srv.Served("revoked"); n != 1 {
		t.Errorf("revoked %d, want 1", n)
	}
	res, text := call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	after := p.srv.Sessions()
	if res.IsError || len(after) <= len(before) || after[len(after)-1].UserID == before[0].UserID {
		t.Errorf("start_session after forget: %s; the Company's Sessions %+v, before %+v: want a new one for a new User", text, after, before)
	}
	// Without an answer (no terminal, no --yes), nothing is forgotten.
	out, _, code = p.run(t, "", "forget", "--json", "example.com")
	var rep person.ForgetReport
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Forgotten || !rep.Held || rep.Error != "nothing was changed" {
		t.Errorf("forget without an answer: exit %d %s", code, out)
	}
}
