package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// signedIn returns a Session signed in by device for scopes, with its
// Account Token kept in the store.
func (co *signInCo) signedIn(t *testing.T, scopes ...string) (*Session, *Account) {
	t.Helper()
	s := co.start(t)
	in := co.signInDevice(t, s, "acct_dana", scopes)
	if err := in.Account.Keep(context.Background(), co.st); err != nil {
		t.Fatal(err)
	}
	return s, in.Account
}

// TestSignedInRenewsWithAccountToken: a signed-in Session renews with the
// refresh_token grant and its session_id, not the JWT bearer grant.
func TestSignedInRenewsWithAccountToken(t *testing.T) {
	co := newSignInCo(t, nil)
	s, _ := co.signedIn(t, "poppy:read")
	co.clock.Advance(2 * time.Hour)
	if code, err := co.account(t, s); err != nil || code != 200 {
		t.Fatalf("account after renewal: %d %v", code, err)
	}
	g := co.grants()
	if g[len(g)-1] != "refresh_token" {
		t.Fatalf("grants = %v, want the renewal to be refresh_token", g)
	}
	if f := co.tokenForms()[len(g)-1]; f.Get("session_id") != s.Info().ID || f.Get("client_assertion") == "" || f.Has("scope") {
		t.Errorf("renewal form = %v", f.Get("session_id"))
	}
}

// TestRotationKeptBeforeUse: a rotated Account Token replaces the old one in
// the store at once, and only the newest is ever sent (poppytest reports the
// use of a replaced one as a violation).
func TestRotationKeptBeforeUse(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{RotateRefreshTokens: true})
	s, acct := co.signedIn(t, "poppy:read")
	first := co.kept(t, s)
	for i := range 3 {
		if err := s.Renew(context.Background()); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		now := co.kept(t, s)
		if now == first || now != acct.token().Reveal() {
			t.Fatalf("renewal %d: the store holds %q, the Account %q (first %q)", i, now[:8], acct.token().Reveal()[:8], first[:8])
		}
		first = now
	}
	// A restarted agent loads the newest and can use it.
	loaded, err := LoadAccount(context.Background(), co.st, co.c.Issuer, s.UserID(), DefaultAccountLabel)
	if err != nil || loaded == nil {
		t.Fatal(err)
	}
	s2, err := co.agent.StartSignedInSession(context.Background(), co.c, s.UserID(), loaded, nil)
	if err != nil || !s2.Info().SignedIn {
		t.Fatalf("a restarted agent: %v %+v", err, s2.Info())
	}
}

// TestNarrowScopes: a Session asks the Account Token for fewer scopes.
func TestNarrowScopes(t *testing.T) {
	co := newSignInCo(t, nil)
	s, acct := co.signedIn(t, readWrite...)
	if !acct.Covers(readWrite, co.clock.Now()) || acct.Covers([]string{"addresses"}, co.clock.Now()) {
		t.Fatal("Covers is wrong")
	}
	if err := s.SignInWith(context.Background(), acct, []string{"poppy:read"}); err != nil {
		t.Fatal(err)
	}
	if got := s.Info().Scopes; !slices.Equal(got, []string{"poppy:read"}) {
		t.Errorf("scopes = %v", got)
	}
	if f := co.tokenForms(); f[len(f)-1].Get("scope") != "poppy:read" {
		t.Errorf("scope sent = %q", f[len(f)-1].Get("scope"))
	}
	if err := s.Renew(context.Background()); err != nil || !slices.Equal(s.Info().Scopes, []string{"poppy:read"}) {
		t.Errorf("renewal widened the scopes: %v %v", s.Info().Scopes, err)
	}
}

// TestInvalidGrantContinuesSignedOut: an Account Token the Company revoked
// (the User disconnected the agent) is dropped from memory and the store;
// the Session continues signed out.
func TestInvalidGrantContinuesSignedOut(t *testing.T) {
	co := newSignInCo(t, nil)
	s, acct := co.signedIn(t, "poppy:read")
	id := s.Info().ID
	co.srv.RevokeAccountTokens("acct_dana")
	if err := s.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info := s.Info(); info.SignedIn || info.ID != id {
		t.Errorf("after invalid_grant: %+v, want Session %s signed out", info, id)
	}
	if !acct.Dropped() || co.kept(t, s) != "" || s.Account() != nil {
		t.Error("the refused Account Token is still held")
	}
	if err := s.SignInWith(context.Background(), acct, nil); !errors.Is(err, ErrAccountTokenRefused) {
		t.Errorf("SignInWith a dropped Account: %v", err)
	}
	if _, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
		t.Errorf("account endpoint: %v, want sign_in_required", err)
	}
}

func TestStartSignedInSessionRefused(t *testing.T) {
	co := newSignInCo(t, nil)
	s, acct := co.signedIn(t, "poppy:read")
	co.srv.RevokeAccountTokens("acct_dana")
	s2, err := co.agent.StartSignedInSession(context.Background(), co.c, s.UserID(), acct, nil)
	if !errors.Is(err, ErrAccountTokenRefused) || !errors.Is(err, ErrInvalidGrant) || s2 == nil || s2.Info().SignedIn {
		t.Fatalf("StartSignedInSession with a revoked token: %v", err)
	}
}

// TestSignInWithAccountMismatch: a Session signed in to another account is
// replaced by a new signed-in Session.
func TestSignInWithAccountMismatch(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	dana := co.signInDevice(t, s, "acct_dana", []string{"poppy:read"})
	other := co.start(t)
	sam := co.signInDevice(t, other, "acct_sam", []string{"poppy:read"})
	if err := s.SignInWith(context.Background(), sam.Account, nil); err != nil {
		t.Fatal(err)
	}
	if info := s.Info(); info.ID == dana.SessionID || !info.SignedIn {
		t.Errorf("after account_mismatch: %+v (was %s)", info, dana.SessionID)
	}
	if n := co.srv.Served("account_mismatch"); n != 1 {
		t.Errorf("account_mismatch served %d times", n)
	}
}

// TestSignOut revokes at the revocation endpoint and renews signed out.
func TestSignOut(t *testing.T) {
	for _, end := range []bool{false, true} {
		t.Run(fmt.Sprintf("end=%v", end), func(t *testing.T) {
			co := newSignInCo(t, &poppytest.Options{EndSessionsOnSignOut: end})
			s, acct := co.signedIn(t, "poppy:read")
			id := s.Info().ID
			if err := s.SignOut(context.Background()); err != nil {
				t.Fatal(err)
			}
			info := s.Info()
			if info.SignedIn || (info.ID == id) == end {
				t.Errorf("after sign-out: %+v (was %s, ended %v)", info, id, end)
			}
			if co.srv.Served("revoked") != 1 || !acct.Dropped() || co.kept(t, s) != "" {
				t.Error("the Account Token was not revoked and forgotten")
			}
			if _, err := co.account(t, s); !errors.Is(err, ErrSignInRequired) {
				t.Errorf("account endpoint after sign-out: %v", err)
			}
		})
	}
}

// TestTwoTasksShareASession: one task holds a signed-out token of a Session
// another task signed in (Poppy 0.1 §4.4). Its sign_in_required is not a
// refusal: with nothing held it is the answer; once the Account Token is
// held, the task renews with it by itself and its request succeeds.
func TestTwoTasksShareASession(t *testing.T) {
	co := newSignInCo(t, nil)
	a := co.start(t)
	b, err := co.agent.ResumeSession(context.Background(), co.c, testUser, a.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	in := co.signInDevice(t, a, "acct_dana", []string{"poppy:read"})
	if _, err = co.account(t, b); !errors.Is(err, ErrSignInRequired) {
		t.Fatalf("the task with the signed-out token, nothing held: %v, want sign_in_required", err)
	}
	if err := a.Hold(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if code, err := co.account(t, b); code != 200 || err != nil || !b.Info().SignedIn || b.Info().ID != a.Info().ID {
		t.Errorf("the same task with the token held: %d %v, %+v", code, err, b.Info())
	}
	if in.Account.Refused() || co.srv.Served("sign_in_required") != 2 {
		t.Errorf("refused %v, sign_in_required served %d: want 2, each once", in.Account.Refused(), co.srv.Served("sign_in_required"))
	}
}

// TestBearerForSignedInSession: the MCP Bearer token of a signed-in Session
// comes from the refresh_token grant with resource and without a proof.
func TestBearerForSignedInSession(t *testing.T) {
	co := newSignInCo(t, nil)
	s, _ := co.signedIn(t, "poppy:read")
	c, err := s.BearerClient(co.c.MCPServers[0])
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Transport.(*bearerTransport)
	tok, err := tr.token(context.Background())
	if err != nil || tok.Type != "Bearer" || !tok.SignedIn {
		t.Fatalf("Bearer token: %+v %v", tok, err)
	}
	f := co.tokenForms()[len(co.tokenForms())-1]
	if f.Get("grant_type") != "refresh_token" || f.Get("resource") != co.c.MCPServers[0] {
		t.Errorf("Bearer request grant %q resource %q", f.Get("grant_type"), f.Get("resource"))
	}
}

func TestAccountShowsNoToken(t *testing.T) {
	co := newSignInCo(t, nil)
	_, acct := co.signedIn(t, "poppy:read")
	j, _ := json.Marshal(map[string]any{"a": acct})
	co.scanSecrets(t, fmt.Sprintf("%v %+v %#v %s", acct, acct, acct, j))
}

// TestResumeSignedInSession: a restarted agent resumes a signed-in Session
// with the refresh_token grant and its session_id (the JWT bearer grant
// there is a §4.2 violation poppytest reports), signs in a signed-out one
// the same way, and continues signed out when the token is refused.
func TestResumeSignedInSession(t *testing.T) {
	co := newSignInCo(t, nil)
	s, acct := co.signedIn(t, "poppy:read")
	out := co.start(t)
	ctx := context.Background()
	for _, want := range []string{s.Info().ID, out.Info().ID} {
		r, err := co.agent.ResumeSignedInSession(ctx, co.c, testUser, want, acct, nil)
		if err != nil || r.Info().ID != want || !r.Info().SignedIn || r.Account() != acct {
			t.Fatalf("resume %s: %v %+v", want, err, r.Info())
		}
		if g := co.grants(); g[len(g)-1] != "refresh_token" {
			t.Errorf("resume %s with grants %v", want, g)
		}
	}
	co.srv.RevokeAccountTokens("acct_dana")
	r, err := co.agent.ResumeSignedInSession(ctx, co.c, testUser, s.Info().ID, acct, nil)
	if !errors.Is(err, ErrAccountTokenRefused) || r == nil || r.Info().SignedIn || r.Info().ID != s.Info().ID {
		t.Fatalf("resume with a revoked Account Token: %v", err)
	}
}

// TestRevokeRotatedElsewhere: another process rotated the Account Token; a
// sign-out revokes the token in use now, not the replaced one it last
// knew, and removes it from the store.
func TestRevokeRotatedElsewhere(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{RotateRefreshTokens: true})
	s, acct := co.signedIn(t, "poppy:read")
	ctx := context.Background()
	other, err := LoadAccount(ctx, co.st, co.c.Issuer, testUser, DefaultAccountLabel)
	if err != nil || other == nil {
		t.Fatal(err)
	}
	if _, err := co.agent.StartSignedInSession(ctx, co.c, testUser, other, nil); err != nil {
		t.Fatal(err)
	}
	live := co.kept(t, s)
	if live == acct.token().Reveal() {
		t.Fatal("the other process did not rotate the Account Token")
	}
	if err := co.agent.Revoke(ctx, co.c, acct); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, r := range co.srv.Requests() {
		if r.Path == "/oauth/revoke" {
			f, _ := url.ParseQuery(string(r.Body))
			sent = append(sent, f.Get("token"))
		}
	}
	if len(sent) != 1 || sent[0] != live {
		t.Errorf("revoked %d tokens, the live one: %v", len(sent), len(sent) == 1 && sent[0] == live)
	}
	if co.kept(t, s) != "" || !acct.Dropped() {
		t.Error("the live Account Token is still kept after sign-out")
	}
}

// TestSignInWithRefusedScopeKeepsRenewing: a SignInWith the Company refuses
// with invalid_scope leaves the Session renewing as before, not resending
// the refused request on every renewal.
func TestSignInWithRefusedScopeKeepsRenewing(t *testing.T) {
	co := newSignInCo(t, nil)
	s, acct := co.signedIn(t, "poppy:read")
	err := s.SignInWith(context.Background(), acct, []string{"addresses"})
	if !errors.Is(err, ErrInvalidScope) {
		t.Fatalf("SignInWith for a scope not granted: %v, want invalid_scope", err)
	}
	if err := s.Renew(context.Background()); err != nil {
		t.Fatalf("renewal after the refused SignInWith: %v", err)
	}
	if info := s.Info(); !info.SignedIn || !slices.Equal(info.Scopes, []string{"poppy:read"}) || s.Account() != acct {
		t.Errorf("after the refused SignInWith: %+v", info)
	}
}

// TestBearerSignedOutWithSession: the Bearer token cached for a signed-in
// Session is requested anew when the Session signs out, or continues signed
// out after its Account Token was refused.
func TestBearerSignedOutWithSession(t *testing.T) {
	for _, how := range []string{"sign-out", "refused"} {
		t.Run(how, func(t *testing.T) {
			co := newSignInCo(t, nil)
			s, _ := co.signedIn(t, "poppy:read")
			c, err := s.BearerClient(co.c.MCPServers[0])
			if err != nil {
				t.Fatal(err)
			}
			tr := c.Transport.(*bearerTransport)
			if tok, err := tr.token(context.Background()); err != nil || !tok.SignedIn {
				t.Fatalf("Bearer token before: %+v %v", tok, err)
			}
			if how == "sign-out" {
				err = s.SignOut(context.Background())
			} else {
				co.srv.RevokeAccountTokens("acct_dana")
				err = s.Renew(context.Background())
			}
			if err != nil || s.Info().SignedIn {
				t.Fatalf("%s: %v %+v", how, err, s.Info())
			}
			if tok, err := tr.token(context.Background()); err != nil || tok.SignedIn {
				t.Errorf("Bearer token after %s: signed in %v, %v", how, tok != nil && tok.SignedIn, err)
			}
		})
	}
}

// TestLateRenewalKeepsSignIn: a signed-out renewal still in flight when a
// sign-in lands does not overwrite the signed-in Session Token; its waiters
// get its result all the same.
func TestLateRenewalKeepsSignIn(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	renewed, release := make(chan struct{}), make(chan struct{})
	late := func(ctx context.Context, used *Token) (*Token, error) {
		tok, err := s.fetch(ctx, used) // a real signed-out renewal, before the sign-in
		close(renewed)
		<-release
		return tok, err
	}
	type result struct {
		tok *Token
		err error
	}
	got := make(chan result, 1)
	go func() {
		tok, err := s.cell.renewAfter(context.Background(), co.agent, s.tokenEP, s.cell.current(), late)
		got <- result{tok, err}
	}()
	<-renewed
	in := co.signInDevice(t, s, "acct_dana", []string{"poppy:read"})
	close(release)
	r := <-got
	if r.err != nil || r.tok.SignedIn {
		t.Fatalf("the waiter of the late renewal got %+v %v", r.tok, r.err)
	}
	if info := s.Info(); !info.SignedIn || info.ID != in.SessionID {
		t.Errorf("after the late renewal: %+v, want signed in", info)
	}
}
