package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/doctor"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// runIn runs poppy-mcp in the directory dir with the person's environment
// and extra variables, and the person's flags after args.
func (p *testPerson) runIn(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	r := runBinaryAt(t, dir, 60*time.Second, append(slices.Clone(p.env), env...), append(args, p.flags...)...)
	return r.stdout, r.stderr, r.code
}

// doctor runs `doctor --json` and returns its report and exit code.
func (p *testPerson) doctor(t *testing.T, dir string, env []string, args ...string) (doctor.Report, int) {
	t.Helper()
	out, errOut, code := p.runIn(t, dir, env, append([]string{"doctor", "--json"}, args...)...)
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return rep, code
}

// checkOf returns the report's check id.
func checkOf(r doctor.Report, id string) doctor.Check {
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	return doctor.Check{}
}

// TestDoctorState: the state directory's permissions (reported, not
// changed), the key's source, the published identity (fine, then one file
// broken), and the clock against a Company's Date header.
func TestDoctorState(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME="}
	rep, code := p.doctor(t, work, env, "--company", "example.com")
	for _, id := range []string{"state_dir", "state_key", "identity", "agent_json", "jwks_json", "clock"} {
		if c := checkOf(rep, id); c.Status != statusOK {
			t.Errorf("%s: %+v", id, c)
		}
	}
	if code != 0 || !rep.OK || !strings.Contains(checkOf(rep, "state_key").Message, "POPPY_STATE_KEY") || len(rep.Configs) != 0 {
		t.Errorf("doctor on a sound state: exit %d %+v", code, rep)
	}

	db := filepath.Join(p.state, "state.db")
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, code = p.doctor(t, work, env)
	if c := checkOf(rep, "state_dir"); code != 1 || c.Status != statusError || !strings.Contains(c.Message, "state.db is 0644") {
		t.Errorf("a state.db others can read: exit %d %+v", code, c)
	}

	// One published file broken: another key set at jwks_uri.
	h := http.Header{"Content-Type": {"application/json"}}
	p.srv.SetDocument(p.srv.AgentHost(), "/jwks.json", http.StatusOK, h, []byte(`{"keys":[{"kty":"EC","crv":"P-256","kid":"other",`+
		`"x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","y":"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"}]}`))
	rep, code = p.doctor(t, work, env)
	if c := checkOf(rep, "jwks_json"); code != 1 || c.Status != statusError || !strings.Contains(c.Message, "lacks the signing key") {
		t.Errorf("a jwks.json without the signing key: exit %d %+v", code, c)
	}

	// The Company's clock five minutes ahead.
	doc := p.srv.URL("example.com", "/.well-known/poppy.json")
	resp, err := p.srv.Client().Get(doc)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	h = resp.Header.Clone()
	h.Set("Date", time.Now().Add(5*time.Minute).UTC().Format(http.TimeFormat))
	p.srv.SetDocument("example.com", "/.well-known/poppy.json", http.StatusOK, h, body.Bytes())
	rep, _ = p.doctor(t, work, env, "--company", "example.com")
	if c := checkOf(rep, "clock"); c.Status != statusError || !strings.Contains(c.Message, "behind") {
		t.Errorf("a clock five minutes behind the Company's: %+v", c)
	}
	if c := p.newDoctorWithoutState(t); c.Status != statusWarn {
		t.Errorf("doctor with no state directory: %+v", c)
	}
}

// newDoctorWithoutState runs doctor on a state directory that does not
// exist: it says to run init, and makes nothing.
func (p *testPerson) newDoctorWithoutState(t *testing.T) doctor.Check {
	t.Helper()
	missing := filepath.Join(t.TempDir(), "none")
	out, _, _ := runBinary(t, p.env, "doctor", "--json", "--state-dir", missing)
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("doctor made the state directory")
	}
	return checkOf(rep, "state_dir")
}

// TestDoctorConfigs: doctor finds each assistant's configuration in its
// usual place (HOME and the project directory), checks every poppy-mcp
// entry with serve's own parser and that its command exists, names the
// variables an entry sets, and never shows their values.
func TestDoctorConfigs(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	home, work := t.TempDir(), t.TempDir()
	const secret = "c2VrcmV0LXN0YXRlLWtleS10aGF0LW11c3Qtbm90LXNob3c="
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := strings.ReplaceAll(binary, `\`, `\\`)
	desktop := filepath.Join(doctor.UserConfigDir(home), "Claude", "claude_desktop_config.json")
	write(desktop, `{"mcpServers": {"poppy": {"command": "`+bin+`", "args": ["serve"],
		"env": {"POPPY_STATE_KEY": "`+secret+`", "POPPY_CLIENT_ID": "https://agent.example/agent.json"}},
		"other": {"command": "npx", "args": ["-y", "some-server"]}}}`)
	write(filepath.Join(home, ".claude.json"), `{"mcpServers": {"poppy": {"type": "stdio", "command": "poppy-mcp", "args": ["serve", "--demo"]}},
		"projects": {"/src/shop": {"mcpServers": {"poppy-shop": {"command": "`+bin+`", "args": ["serve", "--frobnicate"]}}}}}`)
	write(filepath.Join(home, ".cursor", "mcp.json"), `{"mcpServers": {"poppy": {"command": "/nonexistent/bin/poppy-mcp", "args": ["serve"],
		"env": {"POPPY_STAT_KEY": "x"}}}}`)
	write(filepath.Join(work, ".mcp.json"), `{"mcpServers": {"poppy-http": {"type": "http", "url": "http://127.0.0.1:8808/mcp"}}}`)
	write(filepath.Join(work, ".vscode", "mcp.json"), `{
	// VS Code takes comments and trailing commas
	"servers": {
		"poppy": {"type": "stdio", "command": "`+bin+`", "args": ["serve", "--http", "127.0.0.1:8808",],},
	},
}`)
	write(filepath.Join(doctor.UserConfigDir(home), "Code", "User", "settings.json"), `{"editor.tabSize": 2, /* mine */
	"mcp": {"servers": {"poppy": {"command": "`+bin+`", "args": ["demo"]}}}}`)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "PATH=" + filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH")}
	rep, code := p.doctor(t, work, env)
	want := map[string]string{ // file -> status
		desktop:                             statusOK,
		filepath.Join(home, ".claude.json"): statusError, // the project entry's flag
		filepath.Join(home, ".cursor", "mcp.json"):                                 statusError,
		filepath.Join(work, ".mcp.json"):                                           statusInfo,
		filepath.Join(work, ".vscode", "mcp.json"):                                 statusOK,
		filepath.Join(doctor.UserConfigDir(home), "Code", "User", "settings.json"): statusError,
	}
	if code != 1 || len(rep.Configs) != len(want) {
		t.Fatalf("doctor: exit %d, %d configs: %+v", code, len(rep.Configs), rep.Configs)
	}
	messages := ""
	for _, c := range rep.Configs {
		if c.Status != want[c.Path] {
			t.Errorf("%s %s: %s, want %s: %+v", c.App, c.Path, c.Status, want[c.Path], c)
		}
		for _, e := range c.Entries {
			messages += e.Name + ": " + e.Message + "\n"
		}
	}
	for _, w := range []string{"--frobnicate", "/nonexistent/bin/poppy-mcp does not exist", "POPPY_STAT_KEY, which poppy-mcp does not read",
		"runs `poppy-mcp demo`", "connects over HTTP to http://127.0.0.1:8808/mcp"} {
		if !strings.Contains(messages, w) {
			t.Errorf("doctor does not say %q:\n%s", w, messages)
		}
	}
	if e := rep.Configs[0].Entries; len(e) != 1 || strings.Join(e[0].Env, ",") != "POPPY_CLIENT_ID,POPPY_STATE_KEY" {
		t.Errorf("Claude Desktop entries: %+v", e)
	}
	human, errOut, _ := p.runIn(t, work, env, "doctor")
	if strings.Contains(human+errOut, secret) {
		t.Error("doctor shows the value of POPPY_STATE_KEY")
	}
	if !strings.Contains(human, "sets POPPY_CLIENT_ID, POPPY_STATE_KEY (values not shown)") {
		t.Errorf("doctor does not name the variables:\n%s", human)
	}
}

// TestPublishOnStaticHost is README's recipe for publishing the identity
// on a static host, with GitHub Pages as the example: poppytest serves the
// two files at https://poppy-user.github.io/ as GitHub Pages would, doctor
// checks them, a Session starts with that identity, and a key rotation
// goes as the recipe says: init --rotate writes a jwks.json with both
// keys; until it is published doctor says the new key is not, and once it
// is, a serve started before the rotation (still signing with the old key)
// and one started after (with the new key) both work.
func TestPublishOnStaticHost(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, &poppytest.Options{AgentHost: "poppy-user.github.io"})
	env, resolve := companyArgs(t, srv)
	p := &testPerson{srv: srv, env: append(env, "POPPY_STATE_KEY="+newKey()), state: t.TempDir()}
	p.flags = append([]string{"--state-dir", p.state}, resolve...)
	site := t.TempDir()
	if _, errOut, code := runBinary(t, p.env, "init", "--state-dir", p.state, "--out", site,
		"--client-id", "https://poppy-user.github.io/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	publish := func() {
		srv.SetAgentDocuments(readFile(t, filepath.Join(site, "agent.json")), readFile(t, filepath.Join(site, "jwks.json")))
	}
	publish()
	home, env2 := t.TempDir(), []string{"XDG_CONFIG_HOME="}
	env2 = append(env2, "HOME="+home)
	if rep, code := p.doctor(t, home, env2); code != 0 || checkOf(rep, "agent_json").Status != statusOK || checkOf(rep, "jwks_json").Status != statusOK {
		t.Fatalf("doctor after publishing: exit %d %+v", code, rep.Checks)
	}
	before, _ := p.serve(t)
	if res, text := call(t, before, "start_session", map[string]any{"domain": "example.com"}); res.IsError {
		t.Fatalf("start_session with the github.io identity: %s", text)
	}

	if _, errOut, code := runBinary(t, p.env, "init", "--state-dir", p.state, "--out", site, "--rotate",
		"--client-id", "https://poppy-user.github.io/agent.json"); code != 0 {
		t.Fatalf("init --rotate: %s", errOut)
	}
	if ids := jwkIDs(t, site); len(ids) != 2 {
		t.Fatalf("jwks.json after --rotate has %d keys, want the new and the old", len(ids))
	}
	rep, code := p.doctor(t, home, env2)
	if c := checkOf(rep, "jwks_json"); code != 1 || !strings.Contains(c.Message, "lacks the signing key") {
		t.Errorf("doctor before the rotated jwks.json is published: exit %d %+v", code, c)
	}
	publish()
	if rep, code := p.doctor(t, home, env2); code != 0 {
		t.Errorf("doctor after publishing the rotated jwks.json: exit %d %+v", code, rep.Checks)
	}
	if res, text := call(t, before, "start_session", map[string]any{"domain": "example.com", "new": true}); res.IsError {
		t.Errorf("a serve started before the rotation, after it: %s", text)
	}
	after, _ := p.serve(t)
	if res, text := call(t, after, "start_session", map[string]any{"domain": "example.com", "new": true}); res.IsError {
		t.Errorf("a serve started after the rotation: %s", text)
	}
}
