package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/person"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestPersonOfHostedState: a state that serves several people (a hosted
// deployment's) is refused without --user, and with --user ISSUER:SUB each
// command acts for that person only, keyed as the hosted mode keys them.
func TestPersonOfHostedState(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	ctx := context.Background()
	var key []byte
	for _, e := range p.env {
		if v, ok := strings.CutPrefix(e, "POPPY_STATE_KEY="); ok {
			key, _ = base64.StdEncoding.DecodeString(v)
		}
	}
	root, err := store.Open(ctx, p.state, &store.Options{Key: key, Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	const who = "https://login.example.org/realms/people:a:b"
	ana := root.ForUser(mcpauth.User{Issuer: "https://login.example.org/realms/people", Subject: "a:b"}.Key())
	userID, err := ana.UserID(ctx, p.srv.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	if err := ana.PutAccountToken(ctx, store.AccountToken{Issuer: p.srv.Issuer(), UserID: userID, Account: "default",
		Scopes: []string{"poppy:read"}, Token: store.NewSecretString("pat_of_ana")}); err != nil {
		t.Fatal(err)
	}
	secret := bytes.Repeat([]byte{9}, 32) // the deployment's secret, as serve makes it
	if err := root.PutSecret(ctx, app.SecretName, secret); err != nil {
		t.Fatal(err)
	}
	root.Close()

	for _, cmd := range [][]string{{"status"}, {"sign-out", "example.com"}, {"forget", "--yes", "example.com"}} {
		if _, errOut, code := p.run(t, "", cmd...); code != 2 || !strings.Contains(errOut, "--user ISSUER:SUB") {
			t.Errorf("%s without --user: exit %d %s", cmd[0], code, errOut)
		}
	}
	out, errOut, code := p.run(t, "", "status", "--json", "--offline", "--user", who)
	var st person.StatusReport
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Companies) != 1 || !st.Companies[0].SignedIn || st.User != who {
		t.Fatalf("status --user: exit %d %s %s", code, out, errOut)
	}
	// The ID serve's logs name the person by, keyed by the deployment's secret.
	ids, _ := mcpauth.NewLogIDs(secret)
	if want := ids.Of(mcpauth.User{Issuer: "https://login.example.org/realms/people", Subject: "a:b"}); st.LogID != want {
		t.Errorf("status --user: log_id %q, want %q", st.LogID, want)
	}
	out, errOut, code = p.run(t, "", "sign-out", "--json", "--user", who, "example.com")
	var so person.SignOutReport
	if code != 0 || json.Unmarshal([]byte(out), &so) != nil || !so.Revoked || !so.Deleted {
		t.Fatalf("sign-out --user: exit %d %s %s", code, out, errOut)
	}
	if _, _, code := p.run(t, "", "status", "--user", "someone"); code != 2 {
		t.Errorf("--user without an issuer: exit %d, want 2", code)
	}
}
