package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// liveCompany starts a poppytest Company whose violations (the probes
// commit some on purpose) are kept instead of failing the test, runs
// `init` for agent.example in a state directory of its own and publishes
// the files init wrote on the Company's agent host. It returns the Company,
// the environment and the flags that reach it with that identity.
func liveCompany(t *testing.T, opts *poppytest.Options) (*poppytest.Server, []string, []string) {
	t.Helper()
	rep := &poppytest.Reporter{Log: func(string) {}}
	t.Cleanup(rep.Close)
	srv := poppytest.NewServer(rep, opts)
	env, args := companyArgs(t, srv)
	env = append(env, "POPPY_STATE_KEY="+newKey())
	state, out := t.TempDir(), t.TempDir()
	if _, errOut, code := runBinary(t, env, "init", "--state-dir", state, "--out", out, "--client-id", "https://"+srv.AgentHost()+"/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	agentJSON, err := os.ReadFile(filepath.Join(out, "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := os.ReadFile(filepath.Join(out, "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAgentDocuments(agentJSON, jwks)
	return srv, env, append([]string{"check", "--live", "--state-dir", state}, args...)
}

// TestCheckLiveJSON runs check --live as a process against the strict
// Company: exit 0, the --json shape, and the notice on stderr that names
// the identity and the risk before anything is sent.
func TestCheckLiveJSON(t *testing.T) {
	t.Parallel()
	srv, env, args := liveCompany(t, nil)
	out, errOut, code := runBinary(t, env, append(args, "--json", "--conversations", "example.com")...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var rep liveReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if !rep.OK || !rep.Usable || rep.Domain != "example.com" || rep.ClientID != "https://agent.example/agent.json" ||
		rep.MaxRequests != livecheck.DefaultMaxRequests || rep.Requests == 0 || rep.Error != "" || len(rep.Checks) < 25 {
		t.Errorf("report = %+v", rep)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"domain", "client_id", "ok", "usable", "findings", "checks", "requests", "max_requests"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("--json has no %q", k)
		}
	}
	for _, ch := range rep.Checks {
		if ch.Status != livecheck.Passed && ch.Status != livecheck.Skipped || ch.ID == "" || ch.Section == "" || ch.Message == "" {
			t.Errorf("check %+v", ch)
		}
	}
	for _, want := range []string{"probing example.com as https://agent.example/agent.json", "§4.1", "revoke", "--state-dir", "at most 100 requests", "starts one conversation"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if n := srv.Count("api.example.com", "/poppy/conversations"); n != 2 {
		t.Errorf("%d first messages; --conversations sends one, and once again", n)
	}
}

// TestCheckLiveHuman: the human output of a clean run and of a broken
// Company (golden files), with exit codes 0 and 1 and the security bugs
// marked.
func TestCheckLiveHuman(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		golden string
		flaws  poppytest.Flaws
		code   int
	}{
		{"check_live_clean.txt", poppytest.Flaws{}, 0},
		{"check_live_broken.txt", poppytest.Flaws{IgnoreHTM: true, QueryTokens: true, ReplayedAssertions: true,
			RenewalDropsSessionID: true, UnknownScopeInvalidRequest: true}, 1},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			_, env, args := liveCompany(t, &poppytest.Options{Flaws: tc.flaws})
			out, errOut, code := runBinary(t, env, append(args, "example.com")...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
			}
			wantGolden(t, tc.golden, out)
		})
	}
}

// TestCheckLiveDryRun: --dry-run reads the public documents, prints every
// probe it would send (golden), and sends none.
func TestCheckLiveDryRun(t *testing.T) {
	t.Parallel()
	srv, env, args := liveCompany(t, nil)
	out, errOut, code := runBinary(t, env, append(args, "--dry-run", "example.com")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	wantGolden(t, "check_live_dry_run.txt", out)
	for _, r := range srv.Requests() {
		if r.Host != srv.AgentHost() && !strings.HasPrefix(r.Path, "/.well-known/") {
			t.Errorf("--dry-run sent %s %s%s", r.Method, r.Host, r.Path)
		}
	}
	out, _, code = runBinary(t, env, append(args, "--dry-run", "--json", "example.com")...)
	var plan livePlan
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil || len(plan.Plan) < 25 || plan.ClientID == "" {
		t.Errorf("--dry-run --json: exit %d: %s", code, out)
	}
}

// TestCheckLiveCouldNotCheck: without an identity, or with one the Company
// cannot fetch, check --live exits 2 and says what to do.
func TestCheckLiveCouldNotCheck(t *testing.T) {
	t.Parallel()
	srv, env, args := liveCompany(t, nil)
	_, errOut, code := runBinary(t, env, "check", "--live", "--state-dir", t.TempDir(), "example.com")
	if code != 2 || !strings.Contains(errOut, "poppy-mcp init") {
		t.Errorf("no identity: exit %d: %s", code, errOut)
	}
	srv.SetAgentDocuments([]byte(`{}`), []byte(`{"keys":[]}`)) // the Company can no longer read the identity
	out, errOut, code := runBinary(t, env, append(args, "--json", "example.com")...)
	var rep liveReport
	if code != 2 || json.Unmarshal([]byte(out), &rep) != nil || !strings.Contains(rep.Error, "invalid_client") || rep.OK {
		t.Errorf("unknown client: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, code := runBinary(t, env, "check", "--dry-run", "example.com"); code != 2 || !strings.Contains(errOut, "--live") {
		t.Errorf("--dry-run without --live: exit %d: %s", code, errOut)
	}
}
