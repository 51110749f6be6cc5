package agent

import (
	"context"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

type testRelay struct{ closed bool }

func (r *testRelay) Close() error { r.closed = true; return nil }

// TestPersonIdle: a person is idle only with nothing in flight and no
// sign-in pending, since the last call ended.
func TestPersonIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	p := New(mcpauth.User{Issuer: "https://id.example", Subject: "dana"}, &Options{Now: func() time.Time { return now }})
	end := p.Begin()
	if _, idle := p.IdleSince(); idle {
		t.Fatal("idle with a call in flight")
	}
	now = now.Add(time.Minute)
	end()
	end() // once only
	if since, idle := p.IdleSince(); !idle || !since.Equal(now) {
		t.Fatalf("IdleSince = %v, %v; want %v, true", since, idle, now)
	}
	f := auth.NewFlow(auth.KindMediated, "example.com", []string{"poppy:read"}, nil)
	p.SignIns().Replace("https://auth.example", f)
	if _, idle := p.IdleSince(); idle {
		t.Fatal("idle with a sign-in pending")
	}
	f.End(auth.FlowDenied, nil, nil, "")
	if _, idle := p.IdleSince(); !idle {
		t.Fatal("not idle once the sign-in ended")
	}
}

// TestPersonClose: Close stops the person's background work and waits for
// it, stops their sign-ins and closes their relays; nothing is started or
// kept after it.
func TestPersonClose(t *testing.T) {
	p := New(mcpauth.User{Issuer: "https://id.example", Subject: "dana"}, nil)
	stopped := make(chan struct{})
	if !p.Go(func(ctx context.Context) { <-ctx.Done(); close(stopped) }) {
		t.Fatal("Go refused before Close")
	}
	c := p.Company("https://auth.example")
	pageClosed := false
	f, r := auth.NewFlow(auth.KindMediated, "example.com", nil, func() { pageClosed = true }), &testRelay{}
	p.SignIns().Replace(c.Issuer(), f)
	if kept, ok := c.KeepRelay("k", r); !ok || kept != r {
		t.Fatal("relay not kept")
	}
	if kept, _ := c.KeepRelay("k", &testRelay{}); kept != r {
		t.Fatal("a second relay under one key replaced the first")
	}
	p.Close()
	select {
	case <-stopped:
	default:
		t.Fatal("Close returned before the background work stopped")
	}
	if f.Pending() || !pageClosed || !r.closed {
		t.Fatalf("sign-in pending %v, its page closed %v, relay closed %v; want it ended, and both closed", f.Pending(), pageClosed, r.closed)
	}
	if p.Go(func(context.Context) {}) {
		t.Error("Go ran work after Close")
	}
	if _, ok := c.KeepRelay("k2", &testRelay{}); ok {
		t.Error("a relay was kept after Close")
	}
	if len(p.Companies()) != 0 {
		t.Error("the person still holds Companies after Close")
	}
}
