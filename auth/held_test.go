package auth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// heldIn signs a new Session in by device for scopes and holds its Account
// Token, as the sign-in tools do.
func (co *signInCo) heldIn(t *testing.T, scopes ...string) (*Session, *Account) {
	t.Helper()
	s := co.start(t)
	in := co.signInDevice(t, s, "acct_dana", scopes)
	if err := s.Hold(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return s, in.Account
}

// TestOpen: Open chooses among start, continue, signed-in start and
// signed-in continue from what is held, for this agent and a restarted one.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	out, err := co.agent.Open(ctx, co.c, testUser, "")
	if err != nil || out.Info().SignedIn {
		t.Fatalf("Open with nothing held: %+v %v", out.Info(), err)
	}
	s, _ := co.heldIn(t, "poppy:read")
	again, err := co.agent.Open(ctx, co.c, testUser, s.Info().ID)
	if err != nil || again.Info().ID != s.Info().ID || !again.Info().SignedIn {
		t.Fatalf("Open continuing a signed-in Session: %+v %v", again.Info(), err)
	}
	// A restarted agent on the same store: the held token comes from there.
	restarted := New(co.agent.Identity(), &Options{HTTPClient: co.srv.Client(), Store: co.st})
	restarted.now = co.clock.Now
	fresh, err := restarted.Open(ctx, co.c, testUser, "")
	if err != nil || fresh.Info().ID == s.Info().ID || !fresh.Info().SignedIn {
		t.Fatalf("Open of a new Session after a restart: %+v %v", fresh.Info(), err)
	}
	co.srv.EndSession(s.Info().ID)
	replaced, err := restarted.Open(ctx, co.c, testUser, s.Info().ID)
	if err != nil || replaced.Info().ID == s.Info().ID || !replaced.Info().SignedIn {
		t.Fatalf("Open of an ended Session: %+v %v, want a new signed-in one", replaced.Info(), err)
	}
	if c := replaced.TakeChanges(); len(c) != 0 {
		t.Errorf("changes = %v, want none", c)
	}

	// The User disconnected the agent: Open continues signed out and says so once.
	co.srv.RevokeAccountTokens("acct_dana")
	refused, err := restarted.Open(ctx, co.c, testUser, replaced.Info().ID)
	if err != nil || refused.Info().ID != replaced.Info().ID || refused.Info().SignedIn {
		t.Fatalf("Open with a refused Account Token: %+v %v", refused.Info(), err)
	}
	if c := refused.TakeChanges(); !slices.Equal(c, []Change{ChangeAccountRefused}) {
		t.Errorf("changes = %v, want the refusal", c)
	}
	if c := refused.TakeChanges(); len(c) != 0 {
		t.Errorf("changes taken twice: %v", c)
	}
	if held, _ := refused.Held(ctx); held != nil || co.kept(t, s) != "" {
		t.Error("the refused Account Token is still held")
	}
}

// TestSignInHeldConfirmsWithTheCompany: a Session that still looks signed
// in after the User disconnected the agent (Poppy 0.1 §4.9) is not taken
// for signed in: SignInHeld renews with the held token, learns of the
// refusal, and asks for a new sign-in.
func TestSignInHeldConfirmsWithTheCompany(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, acct := co.heldIn(t, "poppy:read")
	if err := s.SignInHeld(ctx, []string{"poppy:read"}); err != nil {
		t.Fatalf("SignInHeld with a good token: %v", err)
	}
	if err := s.SignInHeld(ctx, []string{"poppy:write"}); !errors.Is(err, ErrNoAccountToken) {
		t.Fatalf("SignInHeld for a scope not granted: %v, want ErrNoAccountToken", err)
	}
	co.srv.RevokeAccountTokens("acct_dana")
	if !s.Info().SignedIn {
		t.Fatal("the Session should still look signed in: nothing told it yet")
	}
	if err := s.SignInHeld(ctx, []string{"poppy:read"}); !errors.Is(err, ErrAccountTokenRefused) {
		t.Fatalf("SignInHeld after the disconnect: %v, want ErrAccountTokenRefused", err)
	}
	if s.Info().SignedIn || !acct.Refused() {
		t.Errorf("after the refusal: %+v, refused %v", s.Info(), acct.Refused())
	}
	if err := s.SignInHeld(ctx, []string{"poppy:read"}); !errors.Is(err, ErrNoAccountToken) {
		t.Errorf("SignInHeld once refused: %v, want ErrNoAccountToken", err)
	}
	// A copy the store still has (a delete that failed) never counts again.
	if err := co.st.PutAccountToken(ctx, store.AccountToken{Issuer: co.c.Issuer, UserID: testUser, Account: DefaultAccountLabel,
		Scopes: []string{"poppy:read"}, Token: store.NewSecretString(acct.token().Reveal())}); err != nil {
		t.Fatal(err)
	}
	if held, err := s.Held(ctx); held != nil || err != nil {
		t.Errorf("Held with the refused token back in the store: %v %v", held, err)
	}
}

// TestSignInHeldKeepsNarrowScopes: scopes the Session narrowed to stay when
// they cover the task, and widen to all the token grants when not.
func TestSignInHeldKeepsNarrowScopes(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, _ := co.heldIn(t, readWrite...)
	if err := s.Narrow(ctx, []string{"poppy:read"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SignInHeld(ctx, []string{"poppy:read"}); err != nil || !slices.Equal(s.Info().Scopes, []string{"poppy:read"}) {
		t.Fatalf("SignInHeld within the narrow scopes: %v %v", s.Info().Scopes, err)
	}
	if err := s.SignInHeld(ctx, []string{"poppy:write"}); err != nil || len(s.Info().Scopes) != 2 {
		t.Fatalf("SignInHeld beyond them: %v %v", s.Info().Scopes, err)
	}
	if err := s.Narrow(ctx, []string{"addresses"}); !errors.Is(err, ErrInvalidScope) {
		t.Errorf("Narrow to a scope not granted: %v", err)
	}
	if err := s.Narrow(ctx, nil); err != nil || len(s.Info().Scopes) != 2 {
		t.Errorf("Narrow to all: %v %v", s.Info().Scopes, err)
	}
	other := co.start(t)
	other.h = co.agent.holding(co.c.Issuer, "usr_nobody")
	if err := other.Narrow(ctx, nil); !errors.Is(err, ErrNoAccountToken) {
		t.Errorf("Narrow with nothing held: %v", err)
	}
}

// TestHoldReplacesAndRevokes: a new sign-in's Account Token is held in
// place of the old one, which is revoked; the store keeps the new one.
func TestHoldReplacesAndRevokes(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, first := co.heldIn(t, "poppy:read")
	in := co.signInDevice(t, s, "acct_dana", readWrite)
	if err := s.Hold(ctx, in); err != nil {
		t.Fatal(err)
	}
	if co.srv.Served("revoked") != 1 || !first.Dropped() || co.kept(t, s) != in.Account.token().Reveal() {
		t.Errorf("revoked %d, old dropped %v: the old token was not replaced and revoked", co.srv.Served("revoked"), first.Dropped())
	}
	if held, _ := s.Held(ctx); held != in.Account {
		t.Errorf("Held = %v, want the new Account", held)
	}
	if err := s.Hold(ctx, &SignIn{}); err != nil {
		t.Errorf("Hold of a sign-in without an Account Token: %v", err)
	}
}

// TestNoAccountTokenRestartsSignedOut: a Company that signs in without a
// refresh_token (breaking Poppy 0.1 §4.4) leaves a Session that cannot be
// renewed signed in. When its token is due, a new signed-out Session takes
// its place, without the JWT bearer renewal poppytest refuses (and reports),
// and TakeChanges says so. A Bearer token for its MCP server restarts it
// the same way.
func TestNoAccountTokenRestartsSignedOut(t *testing.T) {
	ctx := context.Background()
	for _, via := range []string{"renewal", "bearer"} {
		t.Run(via, func(t *testing.T) {
			co := newSignInCo(t, &poppytest.Options{NoAccountTokens: true})
			s := co.start(t)
			in := co.signInDevice(t, s, "acct_dana", []string{"poppy:read"})
			if in.Account != nil || !s.Info().SignedIn {
				t.Fatalf("sign-in without an Account Token: %+v, signed in %v", in, s.Info().SignedIn)
			}
			if err := s.SignInHeld(ctx, []string{"poppy:read"}); err != nil {
				t.Errorf("SignInHeld while signed in without a token: %v", err)
			}
			old := s.Info().ID
			switch via {
			case "renewal":
				co.srv.ExpireTokens()
				if c := mustWhoami(t, co.company, s); c.SessionID == old || c.SignedIn {
					t.Errorf("after the renewal: %+v, want a new signed-out Session", c)
				}
			case "bearer":
				bc, err := s.BearerClient(co.c.MCPServers[0])
				if err != nil {
					t.Fatal(err)
				}
				if _, err := bc.Transport.(*bearerTransport).token(ctx); err != nil {
					t.Fatalf("Bearer token: %v", err)
				}
			}
			if info := s.Info(); info.ID == old || info.SignedIn {
				t.Errorf("Session %+v, want a new signed-out one in place of %s", info, old)
			}
			if c := s.TakeChanges(); !slices.Equal(c, []Change{ChangeRestarted}) {
				t.Errorf("changes = %v, want the restart", c)
			}
		})
	}
}

// TestDisconnectFoundOnRequest: the User disconnected the agent in the
// account settings (Poppy 0.1 §4.9). The next account request gets
// sign_in_required; the agent renews with the Account Token once, gets
// invalid_grant, drops the token and continues signed out in the same
// Session, without sending the request again for nothing.
func TestDisconnectFoundOnRequest(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	s, acct := co.heldIn(t, "poppy:read")
	id := s.Info().ID
	co.srv.RevokeAccountTokens("acct_dana")
	if _, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
		t.Fatalf("account after the disconnect: %v, want sign_in_required", err)
	}
	if info := s.Info(); info.SignedIn || info.ID != id {
		t.Errorf("Session %+v, want %s signed out", info, id)
	}
	if !acct.Refused() || co.kept(t, s) != "" {
		t.Error("the refused Account Token is still held")
	}
	if held, _ := s.Held(ctx); held != nil {
		t.Errorf("Held = %v after the refusal", held)
	}
	if c := s.TakeChanges(); !slices.Equal(c, []Change{ChangeAccountRefused}) {
		t.Errorf("changes = %v", c)
	}
	if n := co.srv.Served("sign_in_required"); n != 1 {
		t.Errorf("sign_in_required served %d times, want 1: no retry once the token was refused", n)
	}
	if g := co.grants(); !slices.Equal(g[len(g)-2:], []string{"refresh_token", "jwt-bearer"}) {
		t.Errorf("grants = %v, want the Account Token tried, then a signed-out renewal", g)
	}
}

// TestRenewedButStillSignInRequired: a Company whose token endpoint renews
// the Session signed in while its API still says sign_in_required has
// refused the Account Token (Poppy 0.1 §4.9). It is dropped, and the
// Session, which the Company still has signed in, is replaced by a new
// signed-out one, without a JWT bearer renewal of the signed-in Session.
func TestRenewedButStillSignInRequired(t *testing.T) {
	co := newSignInCo(t, nil)
	api := "api." + co.srv.Domain()
	co.srv.HandleFunc(api, "GET /account", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := co.srv.Authenticate(w, r, ""); ok {
			co.srv.RequireScopes(w, &poppytest.Caller{TokenType: "DPoP"}, "poppy:read") // never signed in
		}
	})
	s, acct := co.heldIn(t, "poppy:read")
	id := s.Info().ID
	if _, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
		t.Fatalf("account: %v, want sign_in_required", err)
	}
	if n := co.srv.Served("sign_in_required"); n != 2 {
		t.Errorf("sign_in_required served %d times, want 2 (the first, and one retry after the renewal)", n)
	}
	if !acct.Refused() || co.kept(t, s) != "" {
		t.Error("the Account Token is still held")
	}
	if info := s.Info(); info.SignedIn || info.ID == id {
		t.Errorf("Session %+v, want a new signed-out one in place of %s", info, id)
	}
	if c := s.TakeChanges(); !slices.Contains(c, ChangeAccountRefused) {
		t.Errorf("changes = %v, want the refusal", c)
	}
}

// TestExpiredAccountTokenContinuesSignedOut: once the Account Token expires
// (Poppy 0.1 §4.8: "the Company returns invalid_grant. The Session
// continues signed out"), the Session is renewed signed out, the same one.
func TestExpiredAccountTokenContinuesSignedOut(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{AccountTokenLifetime: 2 * time.Hour})
	s, acct := co.heldIn(t, "poppy:read")
	id := s.Info().ID
	co.clock.Advance(3 * time.Hour)
	if err := s.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info := s.Info(); info.SignedIn || info.ID != id || !acct.Dropped() {
		t.Errorf("after the Account Token expired: %+v (was %s), dropped %v", info, id, acct.Dropped())
	}
}
