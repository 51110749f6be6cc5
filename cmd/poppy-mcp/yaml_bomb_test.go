package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// serveBomb makes srv serve the YAML alias bomb (517 KB, 757 MB once its
// aliases are expanded) as its store API's OpenAPI document.
func serveBomb(srv *poppytest.Server) {
	srv.SetDocument("api.example.com", "/openapi.json", http.StatusOK, http.Header{"Content-Type": {"application/yaml"}},
		poppytest.YAMLAliasBomb(srv.URL("api.example.com", "/store")))
}

const bombRefused = "YAML alias expansion: the aliases of this 507 KiB document expand it past 3.0 MiB of text (at alias *big on line"

// TestServeYAMLAliasBomb: a Company serves `serve` the YAML alias bomb as
// its OpenAPI document. list_api_operations says the document was refused
// for its alias expansion, and the process goes on serving. Before, the
// conversion grew it past 2 GB: in hosted mode, a replica and everyone on it
// died with it.
func TestServeYAMLAliasBomb(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	serveBomb(srv)
	env, resolve := companyArgs(t, srv)
	const token = "deployment-token-0123456789-abcdefghijklmnop"
	env = append(env, "POPPY_STATE_KEY="+newKey(), "POPPY_HTTP_TOKEN="+token)
	state := t.TempDir()
	if _, errOut, code := runBinary(t, env, "init", "--state-dir", state, "--out", t.TempDir(), "--client-id", "https://"+srv.AgentHost()+"/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	cmd, u, logged := startProcess(t, env, append([]string{"serve", "--state-dir", state, "--http", "127.0.0.1:0"}, resolve...)...)
	cs := connectHTTP(t, u, token)
	got := callTool(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
	apis, _ := got["apis"].([]any)
	if b, _ := json.Marshal(apis); len(apis) != 1 || !strings.Contains(string(b), bombRefused) {
		t.Fatalf("list_api_operations: %v\nserve's log:\n%s", got, logged.String())
	}
	if got := callTool(t, cs, "discover_company", map[string]any{"domain": "example.com"}); got["domain"] != "example.com" || cmd.ProcessState != nil {
		t.Errorf("after the bomb: discover_company %v, process state %v", got, cmd.ProcessState)
	}
	if strings.Contains(logged.String(), "goroutine ") {
		t.Errorf("serve's log has a stack trace:\n%s", logged.String())
	}
}

// TestCheckLiveYAMLAliasBomb: check --live on a Company whose OpenAPI
// document is the YAML alias bomb runs to its end, and api.read says why
// the document gave no operation to probe with.
func TestCheckLiveYAMLAliasBomb(t *testing.T) {
	t.Parallel()
	srv, env, args := liveCompany(t, nil)
	serveBomb(srv)
	out, errOut, code := runBinary(t, env, append(args, "--json", "example.com")...)
	var rep liveReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == 2 || rep.Error != "" {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	for _, ch := range rep.Checks {
		if ch.ID == "api.read" {
			if !strings.Contains(ch.Message, "https://api.example.com/openapi.json: openapi2tools: "+bombRefused) {
				t.Errorf("api.read: %+v", ch)
			}
			return
		}
	}
	t.Errorf("no api.read check: %+v", rep.Checks)
}
