package auth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestSignOutElsewhere: after another process signs the User out
// (SignOutUser, as `poppy-mcp sign-out` does), a Session signed in here
// sends its next request signed out and says so, continuing the same
// Session (Poppy 0.1 §4.9). The Company leaves tokens issued before the
// sign-out signed in (LateSignOut), so without the check before each
// request the Session would still act in the User's account.
func TestSignOutElsewhere(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, &poppytest.Options{LateSignOut: true})
	s, _ := co.heldIn(t, "poppy:read")
	if code, err := co.account(t, s); err != nil || code != http.StatusOK {
		t.Fatalf("account before the sign-out: %d %v", code, err)
	}
	res, err := co.otherProcess(t).SignOutUser(ctx, co.c, s.UserID(), false)
	if err != nil || !res.Held || !res.Revoked || !res.Deleted || !slices.Equal(res.Scopes, []string{"poppy:read"}) {
		t.Fatalf("SignOutUser = %+v, %v", res, err)
	}
	id := s.Info().ID
	if code, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
		t.Errorf("account after a sign-out elsewhere: %d %v, want sign_in_required: the Session still acts in the account", code, err)
	}
	if info := s.Info(); info.SignedIn || info.ID != id {
		t.Errorf("Session after a sign-out elsewhere: %+v, want %s continued signed out", info, id)
	}
	if c := s.TakeChanges(); !slices.Contains(c, ChangeSignedOutElsewhere) {
		t.Errorf("changes = %v, want %s", c, ChangeSignedOutElsewhere)
	}
	if held, err := s.Held(ctx); held != nil || err != nil {
		t.Errorf("Held after a sign-out elsewhere = %v, %v", held, err)
	}
	if g, _ := co.st.Generation(ctx, co.c.Issuer); g.SignOuts != 1 || g.Unrevoked != 0 {
		t.Errorf("generation = %+v, want one revoked sign-out", g)
	}
}

// TestSignOutElsewhereUnrevoked: when the Company cannot revoke the Account
// Token, SignOutUser changes nothing and says why; with force it deletes
// the token anyway, and a Session here signed in with it, still signed in
// at the Company, is left for a new signed-out one rather than renewed with
// the assertion (which §4.2 forbids for a signed-in Session: poppytest
// would report it).
func TestSignOutElsewhereUnrevoked(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, _ := co.heldIn(t, "poppy:read")
	co.srv.HandleFunc("auth."+co.srv.Domain(), "POST /oauth/revoke", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	})
	other := co.otherProcess(t)
	res, err := other.SignOutUser(ctx, co.c, s.UserID(), false)
	if err == nil || res.Revoked || res.Deleted || co.kept(t, s) == "" {
		t.Fatalf("SignOutUser with revocation down = %+v, %v; want an error and the token kept", res, err)
	}
	if code, _ := co.account(t, s); code != http.StatusOK {
		t.Errorf("account after a failed sign-out: %d, want 200", code)
	}
	res, err = other.SignOutUser(ctx, co.c, s.UserID(), true)
	if err == nil || res.Revoked || !res.Deleted || co.kept(t, s) != "" {
		t.Fatalf("forced SignOutUser = %+v, %v; want the error reported and the token deleted", res, err)
	}
	id := s.Info().ID
	if code, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
		t.Errorf("account after a forced sign-out elsewhere: %d %v, want sign_in_required", code, err)
	}
	if info := s.Info(); info.SignedIn || info.ID == id {
		t.Errorf("Session = %+v, want a new signed-out one in place of %s", info, id)
	}
	if c := s.TakeChanges(); !slices.Contains(c, ChangeSignedOutElsewhere) {
		t.Errorf("changes = %v", c)
	}
}

// TestSignInAfterSignOutElsewhere: a sign-in here after the sign-out
// elsewhere, before the Session's next request, stands.
func TestSignInAfterSignOutElsewhere(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, _ := co.heldIn(t, "poppy:read")
	if _, err := co.otherProcess(t).SignOutUser(ctx, co.c, s.UserID(), false); err != nil {
		t.Fatal(err)
	}
	in := co.signInDevice(t, s, "acct_dana", []string{"poppy:read"})
	if err := s.Hold(ctx, in); err != nil {
		t.Fatal(err)
	}
	if code, _ := co.account(t, s); code != http.StatusOK {
		t.Errorf("account after signing in again: %d, want 200", code)
	}
	if c := s.TakeChanges(); slices.Contains(c, ChangeSignedOutElsewhere) {
		t.Errorf("changes = %v: the new sign-in was taken for signed out", c)
	}
}

// TestSignOutCounted: the Session's own sign-out is counted, so another
// process's Session of the User follows it before its next request, and
// the Session that signed out does not report it as done elsewhere.
func TestSignOutCounted(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, &poppytest.Options{LateSignOut: true})
	s, _ := co.heldIn(t, "poppy:read")
	there, err := co.otherProcess(t).Open(ctx, co.c, s.UserID(), "")
	if err != nil || !there.Info().SignedIn {
		t.Fatalf("Open in the other process: %+v %v", there.Info(), err)
	}
	if err := s.SignOut(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := co.account(t, there); !errors.Is(err, ErrSignInRequired) {
		t.Errorf("the other process's Session after the sign-out: %d %v, want sign_in_required", code, err)
	}
	if code, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
		t.Errorf("the Session that signed out: %d %v, want sign_in_required", code, err)
	}
	if c := s.TakeChanges(); slices.Contains(c, ChangeSignedOutElsewhere) {
		t.Errorf("the Session that signed out reports %v", c)
	}
}

// TestForgottenElsewhere: once another process forgot the Company, a
// Session here is Gone, its requests fail with ErrForgotten without
// reaching the Company, and a sign-in it finishes is revoked, not kept.
func TestForgottenElsewhere(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s := co.start(t)
	if s.Gone(ctx) {
		t.Fatal("a new Session is Gone")
	}
	d, err := s.StartDevice(ctx, []string{"poppy:read"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.st.Forget(ctx, co.c.Issuer); err != nil {
		t.Fatal(err)
	}
	if !s.Gone(ctx) {
		t.Error("the Session is not Gone after a forget")
	}
	before := len(co.srv.Requests())
	if _, err := co.account(t, s); !errors.Is(err, ErrForgotten) {
		t.Errorf("request of a forgotten Session: %v, want ErrForgotten", err)
	}
	if n := len(co.srv.Requests()); n != before {
		t.Errorf("%d requests reached the Company", n-before)
	}
	if err := co.srv.ApproveDevice(d.UserCode, "acct_dana"); err != nil {
		t.Fatal(err)
	}
	in, err := s.PollDevice(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var held *HoldError
	if err := s.Hold(ctx, in); !errors.As(err, &held) || !errors.Is(held.Keep, ErrForgotten) || held.Revoke != nil {
		t.Errorf("Hold after a forget = %v, want the token revoked and not kept", err)
	}
	if co.kept(t, s) != "" || co.srv.Served("revoked") != 1 {
		t.Errorf("kept %q, revoked %d", co.kept(t, s), co.srv.Served("revoked"))
	}
}

// TestAccountTokenUseRecorded: each grant with the Account Token records
// its use in the store, for poppy-mcp status.
func TestAccountTokenUseRecorded(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, _ := co.heldIn(t, "poppy:read")
	first, err := co.st.AccountToken(ctx, co.c.Issuer, s.UserID(), DefaultAccountLabel)
	if err != nil || first.UsedAt.IsZero() {
		t.Fatalf("UsedAt after the sign-in = %v, %v", first.UsedAt, err)
	}
	if err := s.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	later, _ := co.st.AccountToken(ctx, co.c.Issuer, s.UserID(), DefaultAccountLabel)
	if !later.UsedAt.After(first.UsedAt) {
		t.Errorf("UsedAt after a renewal = %v, want after %v", later.UsedAt, first.UsedAt)
	}
}
