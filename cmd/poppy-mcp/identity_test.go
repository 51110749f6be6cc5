package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// startSessionText runs serve with args against srv, calls start_session
// through the go-sdk client, and returns the tool's text, whether it was an
// error, and serve's stderr.
func startSessionText(t *testing.T, srv *poppytest.Server, key string, args ...string) (string, bool, string) {
	t.Helper()
	env, resolve := companyArgs(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(binary, append(append([]string{"serve"}, args...), resolve...)...)
	cmd.Env = append(append(os.Environ(), env...), "POPPY_STATE_KEY="+key, "POPPY_CLIENT_ID=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "start_session", Arguments: map[string]any{"domain": "example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	cs.Close()
	cmd.Wait()
	return res.Content[0].(*sdk.TextContent).Text, res.IsError, stderr.String()
}

// TestServeSaysWhatIdentityIsMissing: without an identity, start_session
// and the log say exactly what is missing and what to run, naming the state
// looked in. Before, every case got "no agent identity yet: run poppy-mcp
// init ... and restart with --client-id", wrong after an init (serve needs
// no --client-id then) and silent on where it looked; a state whose key an
// earlier init made without storing its client_id was told to run init as
// if it had none.
func TestServeSaysWhatIdentityIsMissing(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	key := newKey()
	const clientID = "https://agent.example/agent.json"
	empty, keyOnly := t.TempDir(), t.TempDir()
	makeKeyWithoutMetadata(t, keyOnly, key, clientID)
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"nothing": {[]string{"--state-dir", empty},
			[]string{"the state in " + empty + " has no identity", "poppy-mcp init --client-id https://YOUR.DOMAIN/agent.json", "no --client-id needed"}},
		"a key without its client_id": {[]string{"--state-dir", keyOnly},
			[]string{"the state in " + keyOnly + " has the signing key", "no client_id stored", "the key stays the same", "--client-id URL"}},
		"--client-id without init": {[]string{"--state-dir", empty, "--client-id", clientID},
			[]string{"--client-id names " + clientID, "the state in " + empty + " has no signing key for it", "poppy-mcp init --client-id " + clientID}},
	} {
		t.Run(name, func(t *testing.T) {
			text, isError, log := startSessionText(t, srv, key, tc.args...)
			if !isError || strings.Contains(text, "restart with --client-id") {
				t.Errorf("start_session: %q", text)
			}
			for _, want := range tc.want {
				if !strings.Contains(text, want) || !strings.Contains(log, want) {
					t.Errorf("the tool or the log does not say %q:\ntool: %s\nlog: %s", want, text, log)
				}
			}
		})
	}
	if n := srv.Count("auth.example.com", "/oauth/token"); n != 0 {
		t.Errorf("%d token requests without an identity", n)
	}
}

// TestServeAfterInit: after init, serve with no --client-id loads the
// identity init stored, says which in its log, and opens a Session.
func TestServeAfterInit(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	key, state, out := newKey(), t.TempDir(), t.TempDir()
	const clientID = "https://agent.example/agent.json"
	if _, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY=" + key}, "init", "--state-dir", state, "--out", out, "--client-id", clientID); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	agentJSON, _ := os.ReadFile(out + "/agent.json")
	jwks, _ := os.ReadFile(out + "/jwks.json")
	srv.SetAgentDocuments(agentJSON, jwks)
	text, isError, log := startSessionText(t, srv, key, "--state-dir", state)
	if isError || !strings.Contains(log, "agent identity") || !strings.Contains(log, "client_id="+clientID) || !strings.Contains(log, "from=init") {
		t.Errorf("start_session after init: %q\nlog: %s", text, log)
	}
}

// makeKeyWithoutMetadata makes a signing key in the state in dir, as an
// init of an earlier poppy-mcp did, without storing its client_id.
func makeKeyWithoutMetadata(t *testing.T, dir, key, clientID string) {
	t.Helper()
	raw, _ := base64.StdEncoding.DecodeString(key)
	ctx := context.Background()
	st, err := store.Open(ctx, dir, &store.Options{Key: raw, Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := auth.NewIdentity(ctx, clientID, &auth.IdentityOptions{Store: st}); err != nil {
		t.Fatal(err)
	}
}
