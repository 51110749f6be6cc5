package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMCPSessions(t *testing.T) { forEachBackend(t, testMCPSessions) }

// testMCPSessions: a session one user put is theirs alone (another user's
// view finds nothing, cannot touch, set or end it); its initialize params
// and log level come back; ending it makes it unknown; the session ID
// itself is in no row.
func testMCPSessions(t *testing.T, b *backend) {
	ctx := context.Background()
	clk := newClock()
	where := b.fresh(t)
	s := b.openAt(t, where, &Options{Key: testKey, Now: clk.Now})
	dana, sam := s.ForUser("dana-key"), s.ForUser("sam-key")
	const id, init = "mcp-session-0b7c2e1f-dana", `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}}}`
	if err := dana.PutMCPSession(ctx, id, []byte(init), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sam.MCPSessionOf(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("sam reads dana's MCP session: %v, want not found", err)
	}
	for _, err := range []error{sam.SetMCPSessionLogLevel(ctx, id, "debug"), sam.TouchMCPSession(ctx, id)} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("sam changes dana's MCP session: %v, want not found", err)
		}
	}
	if err := sam.EndMCPSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := dana.SetMCPSessionLogLevel(ctx, id, "info"); err != nil {
		t.Fatal(err)
	}
	m, err := dana.MCPSessionOf(ctx, id)
	if err != nil || string(m.Initialize) != init || m.LogLevel != "info" || m.UsedAt.IsZero() {
		t.Fatalf("dana's MCP session after sam's attempts: %+v %v", m, err)
	}
	db := b.raw(t, where)
	var rows int
	var all string
	if err := db.QueryRow(`SELECT COUNT(*), MAX(id) FROM mcp_sessions`).Scan(&rows, &all); err != nil || rows != 1 || strings.Contains(all, id) {
		t.Errorf("the table: %d rows, key %q (%v); want one, not the session ID", rows, all, err)
	}

	if err := dana.EndMCPSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := dana.MCPSessionOf(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("an ended MCP session: %v, want not found", err)
	}
	if err := dana.TouchMCPSession(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("touching an ended MCP session: %v, want not found", err)
	}
}

func TestMCPSessionsExpire(t *testing.T) { forEachBackend(t, testMCPSessionsExpire) }

// testMCPSessionsExpire: a session unused since before the expiry given to
// the next PutMCPSession, whoever puts it, is forgotten.
func testMCPSessionsExpire(t *testing.T, b *backend) {
	ctx := context.Background()
	clk := newClock()
	s := b.openNew(t, &Options{Key: testKey, Now: clk.Now})
	dana, sam := s.ForUser("dana-key"), s.ForUser("sam-key")
	const init = `{}`
	if err := dana.PutMCPSession(ctx, "old", []byte(init), time.Time{}); err != nil {
		t.Fatal(err)
	}
	cut := clk.Now()
	if err := sam.PutMCPSession(ctx, "new", []byte(init), cut); err != nil {
		t.Fatal(err)
	}
	if _, err := dana.MCPSessionOf(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a session unused since before the expiry: %v, want forgotten", err)
	}
	if _, err := sam.MCPSessionOf(ctx, "new"); err != nil {
		t.Errorf("the session just put: %v", err)
	}
}
