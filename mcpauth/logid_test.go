package mcpauth_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// TestLogIDsKeyed: one person has one log ID under one deployment's
// secret, whoever computes it, and another under another deployment's; two
// people have two; the ID is no part of the unkeyed key a list of people
// would reverse.
func TestLogIDsKeyed(t *testing.T) {
	dana := mcpauth.User{Issuer: "https://login.example.org", Subject: "dana@example.org"}
	sam := mcpauth.User{Issuer: "https://login.example.org", Subject: "sam@example.org"}
	secretA, secretB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	a1, a2, b := mustLogIDs(t, secretA), mustLogIDs(t, secretA), mustLogIDs(t, secretB)
	if a1.Of(dana) != a2.Of(dana) || len(a1.Of(dana)) != 12 {
		t.Errorf("one deployment, one person: %q and %q", a1.Of(dana), a2.Of(dana))
	}
	if a1.Of(dana) == b.Of(dana) {
		t.Errorf("two deployments gave dana one ID %q", b.Of(dana))
	}
	if a1.Of(dana) == a1.Of(sam) {
		t.Errorf("dana and sam share the ID %q", a1.Of(sam))
	}
	for _, ids := range []*mcpauth.LogIDs{a1, b} {
		if id := ids.Of(dana); strings.Contains(dana.Key(), id) || strings.HasPrefix(id, dana.Key()[:4]) {
			t.Errorf("the log ID %q is part of the unkeyed key %q", id, dana.Key())
		}
	}
	if _, err := mcpauth.NewLogIDs(make([]byte, 31)); err == nil {
		t.Error("a 31-byte secret was taken")
	}
}

// TestLogHandlerKeyed: a record logged with a person's context, or by a
// logger for the person (ForUser), carries their keyed log ID; a User
// logged as an attribute by mistake shows neither the subject nor the
// unkeyed key.
func TestLogHandlerKeyed(t *testing.T) {
	dana := mcpauth.User{Issuer: "https://login.example.org", Subject: "dana@example.org"}
	ids := mustLogIDs(t, bytes.Repeat([]byte{1}, 32))
	var buf bytes.Buffer
	log := slog.New(mcpauth.LogHandler(slog.NewTextHandler(&buf, nil), ids))
	log.InfoContext(mcpauth.WithUser(context.Background(), dana), "a request")
	mcpauth.ForUser(log, dana).Info("background work")
	log.Info("by mistake", "who", dana)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged %q", buf.String())
	}
	for _, l := range lines[:2] {
		if !strings.Contains(l, "user="+ids.Of(dana)) {
			t.Errorf("no keyed ID in %q", l)
		}
	}
	if !strings.Contains(lines[2], "who=user") {
		t.Errorf("a User logged as an attribute: %q", lines[2])
	}
	if out := buf.String(); strings.Contains(out, dana.Key()[:12]) || strings.Contains(out, "dana@") {
		t.Errorf("the log names dana by her unkeyed key or subject: %s", out)
	}
}

func mustLogIDs(t *testing.T, secret []byte) *mcpauth.LogIDs {
	t.Helper()
	ids, err := mcpauth.NewLogIDs(secret)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
