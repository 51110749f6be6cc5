package auth

import (
	"context"
	"testing"
)

// TestSessionsOpen: a person's Sessions share one Session per Company; a
// second process over the same store starts its own while the first holds
// the claim, continues the saved one once it is given back (Close), and
// fresh starts a new one.
func TestSessionsOpen(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	first := NewSessions(co.agent, co.st, nil)
	s1, err := first.Open(ctx, co.c, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var hooked *Session
	if again, err := first.Open(ctx, co.c, false, func(s *Session) { hooked = s }); err != nil || again != s1 || hooked != s1 {
		t.Fatalf("second Open: %v, %v (hook saw %v), want the first Session", again, err, hooked)
	}
	if first.Current(co.c.Issuer) != s1 {
		t.Fatal("Current is not the Session opened")
	}
	other, err := NewSessions(co.agent, co.st, nil).Open(ctx, co.c, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Info().ID == s1.Info().ID {
		t.Fatal("a second process continued a Session the first one holds")
	}
	first.Close()
	resumed, err := NewSessions(co.agent, co.st, nil).Open(ctx, co.c, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Info().ID != s1.Info().ID {
		t.Errorf("after Close, a new process opened %s, want the saved %s continued", resumed.Info().ID, s1.Info().ID)
	}
	fresh, err := first.Open(ctx, co.c, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Info().ID == s1.Info().ID {
		t.Error("fresh continued the Session")
	}
}
