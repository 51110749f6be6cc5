package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeaseTokens(t *testing.T) { forEachBackend(t, testLeaseTokens) }

// testLeaseTokens: a lease's fencing token is new each time another holder
// takes it (after expiry, after a release that deleted its row, by
// TakeLease), greater than every one before, also across names and
// people; renewing, or taking it again as its holder, keeps it.
func testLeaseTokens(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	const name = "device-signin https://auth.example.com"
	var last int64
	next := func(what string) func(Lease, error) Lease {
		return func(l Lease, err error) Lease {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if l.Token <= last {
				t.Fatalf("%s: token %d, want more than %d", what, l.Token, last)
			}
			last = l.Token
			return l
		}
	}
	a := next("first acquire")(s.AcquireLease(ctx, name, "holder-a", time.Minute))
	if again, err := s.AcquireLease(ctx, name, "holder-a", time.Minute); err != nil || again.Token != a.Token {
		t.Fatalf("AcquireLease by its holder = token %d, %v; want %d kept", again.Token, err, a.Token)
	}
	if r, err := s.RenewLease(ctx, a, time.Minute); err != nil || r.Token != a.Token {
		t.Fatalf("RenewLease = token %d, %v; want %d kept", r.Token, err, a.Token)
	}
	next("another name")(s.AcquireLease(ctx, "another", "holder-a", time.Minute))
	next("another person")(s.ForUser("someone").AcquireLease(ctx, name, "holder-a", time.Minute))
	expireLease(t, b, where, "", name)
	bl := next("taken over once expired")(s.AcquireLease(ctx, name, "holder-b", time.Minute))
	if err := s.ReleaseLease(ctx, bl); err != nil {
		t.Fatal(err)
	}
	// The row is gone; a token is never given twice all the same.
	a = next("taken after a release")(s.AcquireLease(ctx, name, "holder-a", time.Minute))
	next("taken by force")(s.TakeLease(ctx, name, "holder-c", time.Minute))
	// Another process on the same state continues the sequence.
	other := b.openAt(t, where, nil)
	next("taken through another Store")(other.TakeLease(ctx, name, "holder-d", time.Minute))
}

func TestFencedWrites(t *testing.T) { forEachBackend(t, testFencedWrites) }

// testFencedWrites: a replica paused past its lease's expiry wakes after
// another took the lease over; every write it makes under its lease is
// refused with ErrLeaseLost and changes nothing, while the new holder's
// writes go through.
func testFencedWrites(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	stale, fresh := b.openAt(t, where, nil).ForUser("dana"), b.openAt(t, where, nil).ForUser("dana")
	const name, iss = "account-token https://auth.example.com usr_1 default", "https://auth.example.com"
	old, err := stale.AcquireLease(ctx, name, "paused", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := stale.Fenced(old)
	tok := AccountToken{Issuer: iss, UserID: "usr_1", Account: "default", Token: NewSecretString("rt-1")}
	if err := w.PutSecret(ctx, "kept", []byte("by the first holder")); err != nil {
		t.Fatalf("fenced PutSecret while held: %v", err)
	}
	if err := w.PutAccountToken(ctx, tok); err != nil {
		t.Fatalf("fenced PutAccountToken while held: %v", err)
	}
	if err := w.DeleteSecret(ctx, "never there"); err != nil {
		t.Fatalf("fenced DeleteSecret of nothing while held: %v", err)
	}

	expireLease(t, b, where, "dana", name)
	if err := w.PutSecret(ctx, "kept", []byte("late")); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("fenced PutSecret after expiry: %v, want ErrLeaseLost", err)
	}
	nl, err := fresh.AcquireLease(ctx, name, "new", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	nw := fresh.Fenced(nl)
	tok.Token = NewSecretString("rt-2")
	if err := nw.PutAccountToken(ctx, tok); err != nil {
		t.Fatalf("the new holder's PutAccountToken: %v", err)
	}

	// The paused replica wakes.
	lost := map[string]error{
		"CheckLease":   stale.CheckLease(ctx, old),
		"PutSecret":    w.PutSecret(ctx, "kept", []byte("by the stale holder")),
		"DeleteSecret": w.DeleteSecret(ctx, "kept"),
		"PutAccountToken": w.PutAccountToken(ctx, AccountToken{Issuer: iss, UserID: "usr_1", Account: "default",
			Token: NewSecretString("rt-stale")}),
		"DeleteAccountToken": w.DeleteAccountToken(ctx, iss, "usr_1", "default"),
		"AccountTokenUsed":   w.AccountTokenUsed(ctx, iss, "usr_1", "default"),
		"PutSession":         w.PutSession(ctx, Session{Issuer: iss, ID: "ses_1", UserID: "usr_1"}),
	}
	for what, err := range lost {
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s by the stale holder: %v, want ErrLeaseLost", what, err)
		}
	}
	if v, err := fresh.Secret(ctx, "kept"); err != nil || string(v) != "by the first holder" {
		t.Errorf("secret after the stale writes = %q, %v; want it unchanged", v, err)
	}
	if got, err := fresh.AccountToken(ctx, iss, "usr_1", "default"); err != nil || got.Token.RevealString() != "rt-2" {
		t.Errorf("Account Token after the stale writes: %v; want the new holder's", err)
	}
	if _, err := fresh.Session(ctx, iss, "ses_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the stale holder's Session was stored: %v", err)
	}
	if err := fresh.CheckLease(ctx, nl); err != nil {
		t.Errorf("CheckLease of the new holder: %v", err)
	}
}

func TestTakeLeaseFences(t *testing.T) { forEachBackend(t, testTakeLeaseFences) }

// testTakeLeaseFences: a lease taken by force (TakeLease) from a holder
// that still has time left fences that holder at once, and its renewals
// find the lease lost; the holder it was taken from cannot take it back
// while it is held.
func testTakeLeaseFences(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openAt(t, b.fresh(t), nil)
	const name = "device-signin https://auth.example.com"
	old, err := s.AcquireLease(ctx, name, "old sign-in", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := s.TakeLease(ctx, name, "new sign-in", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fenced(newer).PutSecret(ctx, "signin/device/x", []byte("new")); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	if err := s.Fenced(old).PutSecret(ctx, "signin/device/x", []byte("old outcome")); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the old holder's write: %v, want ErrLeaseLost", err)
	}
	if _, err := s.RenewLease(ctx, old, time.Hour); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the old holder's renewal: %v, want ErrLeaseLost", err)
	}
	if _, err := s.AcquireLease(ctx, name, "old sign-in", time.Hour); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("the old holder took the lease back: %v, want ErrLeaseHeld", err)
	}
	if v, err := s.Secret(ctx, "signin/device/x"); err != nil || string(v) != "new" {
		t.Errorf("kept = %q, %v; want the new holder's", v, err)
	}
}
