package auth

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// signInsUnderTest is a person's Sessions and SignIns over co's store, with
// the background polling counted, so a test waits for it to end rather
// than for a time.
type signInsUnderTest struct {
	sessions *Sessions
	signIns  *SignIns
	wg       sync.WaitGroup
}

func newSignIns(t *testing.T, co *signInCo) *signInsUnderTest {
	t.Helper()
	u := &signInsUnderTest{sessions: NewSessions(co.agent, co.st, nil)}
	u.signIns = NewSignIns(u.sessions, co.st, &SignInsOptions{
		Go: func(f func(context.Context)) bool {
			u.wg.Add(1)
			go func() { defer u.wg.Done(); f(context.Background()) }()
			return true
		},
		Open: func(ctx context.Context, domain string) (*Session, error) {
			return u.sessions.Open(ctx, co.c, false, nil)
		},
	})
	t.Cleanup(func() { u.signIns.Close(); u.wg.Wait(); u.sessions.Close() })
	return u
}

func (u *signInsUnderTest) open(t *testing.T, co *signInCo) *Session {
	t.Helper()
	s, err := u.sessions.Open(context.Background(), co.c, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSignInsDevice: a Device Sign-In started through SignIns is the
// Company's latest, kept in the store while pending, polled in the
// background until the user approves it, and then complete, here and in
// the store, with the Session signed in.
func TestSignInsDevice(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	u := newSignIns(t, co)
	s := u.open(t, co)
	f, err := u.signIns.StartDevice(ctx, co.c.Issuer, co.c.Domain, s, readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if u.signIns.Current(co.c.Issuer) != f || !u.signIns.Pending() || f.Kind != KindDevice {
		t.Fatal("the sign-in started is not the Company's latest, pending")
	}
	if kept, err := LoadDeviceFlow(ctx, co.st, co.c.Issuer); err != nil || kept.ID != f.ID || kept.Status != FlowPending {
		t.Fatalf("kept = %+v, %v; want it pending", kept, err)
	}
	if err := co.srv.ApproveDevice(f.Device.UserCode, "acct_dana", "poppy:read"); err != nil {
		t.Fatal(err)
	}
	<-f.Done()
	u.wg.Wait() // the outcome is kept before the polling ends
	st := f.State()
	if st.Status != FlowComplete || !slices.Equal(st.Granted, []string{"poppy:read"}) || !slices.Equal(st.Missing, []string{"poppy:write"}) {
		t.Fatalf("state = %+v", st)
	}
	if !s.Info().SignedIn || u.signIns.Pending() {
		t.Error("the Session is not signed in, or a sign-in still pends")
	}
	if kept, err := LoadDeviceFlow(ctx, co.st, co.c.Issuer); err != nil || kept.Status != FlowComplete {
		t.Errorf("kept = %+v, %v; want it complete", kept, err)
	}
}

// TestSignInsReplace: a newer sign-in at a Company stops the one pending,
// whose polling ends; a Denied one ends denied and leaves the Session
// signed out (Poppy 0.1 §4.4: "A pending or failed sign-in leaves
// existing tokens unchanged").
func TestSignInsReplace(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	u := newSignIns(t, co)
	s := u.open(t, co)
	first, err := u.signIns.StartDevice(ctx, co.c.Issuer, co.c.Domain, s, readWrite)
	if err != nil {
		t.Fatal(err)
	}
	second, err := u.signIns.StartDevice(ctx, co.c.Issuer, co.c.Domain, s, readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if st := first.State(); st.Status != FlowFailed || u.signIns.Current(co.c.Issuer) != second {
		t.Fatalf("first = %+v after a newer sign-in; want it failed and replaced", st)
	}
	if err := co.srv.DenyDevice(second.Device.UserCode); err != nil {
		t.Fatal(err)
	}
	<-second.Done()
	u.wg.Wait() // both pollings ended
	if st := second.State(); st.Status != FlowDenied || s.Info().SignedIn {
		t.Errorf("second = %+v, signed in %v; want denied, signed out", st, s.Info().SignedIn)
	}
}

// TestSignInsTakeOver: a device sign-in whose process stopped polling it
// (Close) stays pending in the store; another process takes it over under
// the lease and finishes it, and a third, reading the latest sign-in,
// learns it completed and signs its own Session in with the Account Token
// kept (resume after a restart).
func TestSignInsTakeOver(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	a := newSignIns(t, co)
	f, err := a.signIns.StartDevice(ctx, co.c.Issuer, co.c.Domain, a.open(t, co), readWrite)
	if err != nil {
		t.Fatal(err)
	}
	a.signIns.Close()
	a.wg.Wait()
	a.sessions.Close()
	kept, err := LoadDeviceFlow(ctx, co.st, co.c.Issuer)
	if err != nil || kept.ID != f.ID || kept.Status != FlowPending {
		t.Fatalf("kept after Close = %+v, %v; want it pending", kept, err)
	}
	b := newSignIns(t, co)
	b.signIns.TakeOver(ctx, kept)
	taken := b.signIns.Current(co.c.Issuer)
	if taken == nil || taken.ID != f.ID || !taken.Pending() {
		t.Fatalf("taken over = %+v; want the same sign-in, pending", taken)
	}
	b.signIns.TakeOver(ctx, kept) // the lease is held: nothing more
	if err := co.srv.ApproveDevice(f.Device.UserCode, "acct_dana"); err != nil {
		t.Fatal(err)
	}
	<-taken.Done()
	b.wg.Wait()
	if st := taken.State(); st.Status != FlowComplete {
		t.Fatalf("taken over = %+v, want complete", st)
	}
	b.sessions.Close()
	c := newSignIns(t, co)
	latest := c.signIns.Latest(ctx, co.c.Issuer)
	if latest == nil || latest.State().Status != FlowComplete {
		t.Fatalf("Latest in a third process = %+v, want the sign-in complete", latest)
	}
	if s := c.sessions.Current(co.c.Issuer); s == nil || !s.Info().SignedIn {
		t.Error("the third process's Session was not signed in with the kept Account Token")
	}
}

// TestKinds: the table has every kind once, in the order a Personal Agent
// suggests them, and reads what poppy.json offers.
func TestKinds(t *testing.T) {
	var got []Kind
	for _, k := range Kinds() {
		got = append(got, k.Kind)
		if k.Offer == nil || k.Name == "" || k.Section == "" {
			t.Errorf("%s: row incomplete: %+v", k.Kind, k)
		}
	}
	if want := []Kind{KindDevice, KindDirect, KindMediated}; !slices.Equal(got, want) {
		t.Fatalf("Kinds = %v, want %v", got, want)
	}
	if _, ok := Kind("password").Spec(); ok {
		t.Error("an unknown kind has a row")
	}
	if _, ok := KindDevice.Offered(nil); ok {
		t.Error("no auth offers a kind")
	}
	a := &discovery.Auth{Device: &discovery.SignInType{Scopes: []string{"poppy:read"}}, Mediated: &discovery.Mediated{Scopes: []string{"poppy:write"}}}
	for k, want := range map[Kind][]string{KindDevice: {"poppy:read"}, KindDirect: nil, KindMediated: {"poppy:write"}} {
		if got, ok := k.Offered(a); ok != (want != nil) || !slices.Equal(got, want) {
			t.Errorf("%s offers %v, %v; want %v", k, got, ok, want)
		}
	}
}

// TestSignInsCancel: Cancel ends the sign-in pending at a Company, with
// what the model hears, and stops its polling; with none pending it does
// nothing.
func TestSignInsCancel(t *testing.T) {
	co := newSignInCo(t, nil)
	u := newSignIns(t, co)
	f, err := u.signIns.StartDevice(context.Background(), co.c.Issuer, co.c.Domain, u.open(t, co), readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if !u.signIns.Cancel(co.c.Issuer, "The user signed out.") {
		t.Fatal("Cancel found no sign-in pending")
	}
	u.wg.Wait() // the polling stopped
	if st := f.State(); st.Status != FlowFailed || st.Detail != "The user signed out." {
		t.Errorf("state = %+v, want failed with the detail given", st)
	}
	if u.signIns.Cancel(co.c.Issuer, "again") || u.signIns.Pending() {
		t.Error("a second Cancel found a sign-in pending")
	}
}
