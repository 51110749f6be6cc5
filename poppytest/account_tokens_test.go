package poppytest_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// signedInDana starts a Session, signs it in to acct_dana with scope and
// returns the Session ID, the signed-in Session Token and the Account Token.
func signedInDana(a *rawAgent, c *clock, scope string) (sid, tok, accountToken string) {
	a.t.Helper()
	sid = a.startSession().str("session_id")
	r := a.signInDevice(c, sid, "acct_dana", scope)
	return sid, r.str("access_token"), r.str("refresh_token")
}

func TestRefreshGrant(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	_, _, at := signedInDana(a, c, "poppy:read poppy:write")

	// Poppy 0.1 §4.8: "Without one, it starts a new Session that is already signed in"
	r := a.refresh(at, nil)
	if r.status != 200 || r.body["signed_in"] != true || r.str("scope") != "poppy:read poppy:write" || r.body["refresh_token"] != nil {
		t.Fatalf("refresh without session_id: %d %v", r.status, r.body)
	}
	if len(s.Sessions()) != 2 || len(s.SignedInSessions()) != 2 {
		t.Errorf("Sessions %d, signed in %d; want 2 and 2", len(s.Sessions()), len(s.SignedInSessions()))
	}
	// With session_id, a signed-out Session is signed in, here with fewer scopes.
	out := a.startSession().str("session_id")
	r = a.refresh(at, url.Values{"session_id": {out}, "scope": {"poppy:read"}})
	if r.status != 200 || r.str("session_id") != out || r.str("scope") != "poppy:read" || r.body["signed_in"] != true {
		t.Fatalf("refresh into a signed-out Session: %d %v", r.status, r.body)
	}
	if acct := a.getWithToken(testAccountURL, r.str("access_token")); acct.str("account") != "acct_dana" {
		t.Errorf("account endpoint: %v", acct.body)
	}
	// Poppy 0.1 §4.8: "It can't ask for more."
	wantError(t, "wider scope", a.refresh(at, url.Values{"scope": {"addresses"}}), 400, "invalid_scope")

	// Poppy 0.1 §4.3: without a proof and with resource = the MCP url, a Bearer token.
	f := a.clientForm(testClientID, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {at},
		"session_id": {out}, "resource": {testMCPURL}})
	if b := a.postToken(f, ""); b.status != 200 || b.str("token_type") != "Bearer" || b.body["signed_in"] != true {
		t.Errorf("Bearer refresh: %d %v", b.status, b.body)
	}
	wantNoViolation(t, s, rt)
}

func TestRefreshSessionRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		send      func(a *rawAgent, c *clock, at string) response
		code      string
		violation string
	}{
		{"Session of another account", func(a *rawAgent, c *clock, at string) response {
			sam := a.startSession().str("session_id")
			a.signInDevice(c, sam, "acct_sam", "poppy:read")
			return a.refresh(at, url.Values{"session_id": {sam}})
		}, "account_mismatch", ""},
		{"Session of another User", func(a *rawAgent, _ *clock, at string) response {
			a.userID = "usr_other"
			return a.refresh(at, url.Values{"session_id": {a.startSession().str("session_id")}})
		}, "invalid_session", "another client_id or User"},
		{"ended Session", func(a *rawAgent, _ *clock, at string) response {
			sid := a.startSession().str("session_id")
			a.s.EndSession(sid)
			return a.refresh(at, url.Values{"session_id": {sid}})
		}, "invalid_session", ""},
		{"unknown Session", func(a *rawAgent, _ *clock, at string) response {
			return a.refresh(at, url.Values{"session_id": {"ses_nope"}})
		}, "invalid_session", ""},
		{"another client", func(a *rawAgent, _ *clock, at string) response {
			a.publishOther()
			return a.postToken(a.clientForm(otherClientID, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {at}}), a.tokenProof())
		}, "invalid_grant", "issued to another client_id"},
		{"no refresh_token", func(a *rawAgent, _ *clock, _ string) response {
			return a.refresh("", nil)
		}, "invalid_request", "without refresh_token"},
		{"unknown Account Token", func(a *rawAgent, _ *clock, _ string) response {
			return a.refresh("pat_unknown", nil)
		}, "invalid_grant", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, c := newSignInCompany(t, nil)
			_, _, at := signedInDana(a, c, "poppy:read")
			wantError(t, tc.name, tc.send(a, c, at), 400, tc.code)
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§4.8", tc.violation)
			}
		})
	}
}

func TestRotateRefreshTokens(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{RotateRefreshTokens: true, AccountTokenLifetime: time.Hour})
	_, _, at := signedInDana(a, c, "poppy:read")
	c.Advance(10 * time.Minute)
	r := a.refresh(at, nil)
	next := r.str("refresh_token")
	if r.status != 200 || !strings.HasPrefix(next, "pat_") || next == at || r.body["refresh_token_expires_in"] != 3000.0 {
		t.Fatalf("rotating refresh: %d %v", r.status, r.body)
	}
	if r := a.refresh(next, nil); r.status != 200 {
		t.Errorf("the new Account Token: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
	// Poppy 0.1 §4.8: "The Personal Agent then MUST use the new one from then on."
	wantError(t, "the old Account Token", a.refresh(at, nil), 400, "invalid_grant")
	wantViolation(t, s, rt, "§4.8", "replaced")
}

// TestNoAccountTokens: a sign-in answers without refresh_token, the Session
// is signed in, and an agent that renews that Session with the JWT bearer
// grant (it has no Account Token to renew it with) is still caught: the way
// on is a new Session.
func TestNoAccountTokens(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{NoAccountTokens: true})
	sid := a.startSession().str("session_id")
	r := a.signInDevice(c, sid, "acct_dana", "poppy:read")
	if _, ok := r.body["refresh_token"]; ok || r.body["signed_in"] != true {
		t.Fatalf("sign-in under NoAccountTokens: %v", r.body)
	}
	if acct := a.getWithToken(testAccountURL, r.str("access_token")); acct.str("account") != "acct_dana" {
		t.Errorf("account endpoint: %v", acct.body)
	}
	if fresh := a.startSession(); fresh.body["signed_in"] != false || fresh.str("session_id") == sid {
		t.Errorf("a new Session: %v", fresh.body)
	}
	wantNoViolation(t, s, rt)
	wantError(t, "JWT bearer renewal of the signed-in Session",
		a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.tokenProof()), 400, "invalid_grant")
	wantViolation(t, s, rt, "§4.2", "renew it with the Account Token")
}

func TestAccountTokenExpires(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{AccountTokenLifetime: time.Hour})
	sid := a.startSession().str("session_id")
	r := a.signInDevice(c, sid, "acct_dana", "poppy:read")
	if r.body["refresh_token_expires_in"] != 3600.0 {
		t.Errorf("refresh_token_expires_in %v, want 3600", r.body["refresh_token_expires_in"])
	}
	c.Advance(time.Hour)
	wantError(t, "expired Account Token", a.refresh(r.str("refresh_token"), nil), 400, "invalid_grant")
	// Poppy 0.1 §4.8: "The Session continues signed out": renewed with the JWT bearer grant.
	renewed := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.tokenProof())
	if renewed.status != 200 || renewed.body["signed_in"] != false || renewed.str("scope") != "" {
		t.Errorf("signed-out renewal after the Account Token expired: %d %v", renewed.status, renewed.body)
	}
	wantNoViolation(t, s, rt)
}

func TestRevocationSignsOut(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sid, tok, at := signedInDana(a, c, "poppy:read")
	if r := a.revoke(at); r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("revoke: %d %v", r.status, r.body)
	}
	// Poppy 0.1 §4.9: "Companies SHOULD check on each request whether the Session is still signed in"
	if who := a.whoami(tok, ""); who.status != 200 || who.body["signed_in"] != false || who.body["account"] != nil || who.body["scopes"] != nil {
		t.Errorf("whoami with a token issued signed in: %d %v", who.status, who.body)
	}
	acct := a.getWithToken(testAccountURL, tok)
	if acct.status != 401 || !strings.HasPrefix(acct.header.Get("WWW-Authenticate"), `DPoP error="sign_in_required"`) {
		t.Errorf("account endpoint after sign-out: %d %q", acct.status, acct.header.Get("WWW-Authenticate"))
	}
	wantError(t, "revoked Account Token", a.refresh(at, nil), 400, "invalid_grant")
	if len(s.SignedInSessions()) != 0 {
		t.Errorf("SignedInSessions() = %+v", s.SignedInSessions())
	}
	// Poppy 0.1 §4.9: "Usually those Sessions continue signed out"
	renew := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.tokenProof())
	if renew.status != 200 || renew.body["signed_in"] != false {
		t.Errorf("renewing the signed-out Session: %d %v", renew.status, renew.body)
	}
	if r := a.revoke("pat_never_issued"); r.status != 200 {
		t.Errorf("revoking an unknown token: %d", r.status) // RFC 7009 §2.2
	}
	if s.Served("revoked") != 1 {
		t.Errorf("Served(revoked) = %d", s.Served("revoked"))
	}
	wantNoViolation(t, s, rt)
}

// TestLateSignOut: with LateSignOut, a token issued before the sign-out
// still reaches the account, while renewing the Session signs it out.
func TestLateSignOut(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{LateSignOut: true})
	sid, tok, at := signedInDana(a, c, "poppy:read")
	if r := a.revoke(at); r.status != 200 {
		t.Fatalf("revoke: %d %v", r.status, r.body)
	}
	if acct := a.getWithToken(testAccountURL, tok); acct.status != 200 {
		t.Errorf("account endpoint with a token issued before the sign-out: %d, want 200", acct.status)
	}
	renew := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.tokenProof())
	if renew.status != 200 || renew.body["signed_in"] != false {
		t.Errorf("renewing the signed-out Session: %d %v", renew.status, renew.body)
	}
	wantNoViolation(t, s, rt)
}

func TestEndSessionsOnSignOut(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{EndSessionsOnSignOut: true})
	sid, tok, _ := signedInDana(a, c, "poppy:read")
	if n := s.RevokeAccountTokens("acct_dana"); n != 1 {
		t.Errorf("RevokeAccountTokens = %d, want 1", n)
	}
	if who := a.whoami(tok, ""); who.status != 401 {
		t.Errorf("token of an ended Session: %d %v", who.status, who.body)
	}
	renew := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.tokenProof())
	wantError(t, "renewing an ended Session", renew, 400, "invalid_session")
	wantNoViolation(t, s, rt)
}

func TestRevokeAccountTokens(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	_, tok, at := signedInDana(a, c, "poppy:read")
	_, _, other := signedInDana(a, c, "poppy:write")
	if n := s.RevokeAccountTokens("acct_sam"); n != 0 {
		t.Errorf("RevokeAccountTokens(acct_sam) = %d", n)
	}
	if n := s.RevokeAccountTokens("acct_dana"); n != 2 {
		t.Errorf("RevokeAccountTokens(acct_dana) = %d, want 2", n)
	}
	for _, v := range []string{at, other} {
		wantError(t, "refresh after disconnect", a.refresh(v, nil), 400, "invalid_grant")
	}
	if who := a.whoami(tok, ""); who.body["signed_in"] != false {
		t.Errorf("whoami after disconnect: %v", who.body)
	}
	wantNoViolation(t, s, rt)
}

func TestRevocationRejections(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	_, tok, at := signedInDana(a, c, "poppy:read")
	a.publishOther()
	r := a.postForm(testRevokeURL, a.clientForm(otherClientID, url.Values{"token": {at}}), "")
	wantError(t, "another client's Account Token", r, 400, "unauthorized_client")
	wantViolation(t, s, rt, "§4.9", "another client_id")
	if who := a.whoami(tok, ""); who.body["signed_in"] != true {
		t.Errorf("a refused revocation signed out: %v", who.body)
	}
	wantError(t, "no token", a.postForm(testRevokeURL, a.clientForm(testClientID, nil), ""), 400, "invalid_request")
	if v := s.Violations(); len(v) != 2 || !strings.Contains(v[1], "without token") {
		t.Errorf("violations %q", v)
	}
}

func TestRevokeSessionToken(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	_, tok, _ := signedInDana(a, c, "poppy:read")
	if r := a.revoke(tok); r.status != 200 {
		t.Fatalf("revoke a Session Token: %d", r.status)
	}
	if who := a.whoami(tok, ""); who.status != 401 {
		t.Errorf("a revoked Session Token: %d", who.status)
	}
	if len(s.SignedInSessions()) != 1 {
		t.Errorf("revoking a Session Token signed the Session out")
	}
	wantNoViolation(t, s, rt)
}

func TestAccountEndpointScopes(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	_, tok, _ := signedInDana(a, c, "poppy:write")
	r := a.getWithToken(testAccountURL, tok)
	if wa := r.header.Get("WWW-Authenticate"); r.status != 403 || !strings.Contains(wa, `error="insufficient_scope"`) || !strings.Contains(wa, `scope="poppy:read"`) {
		t.Errorf("poppy:write only: %d %q", r.status, wa)
	}
	out := a.startSession().str("access_token")
	if r := a.getWithToken(testAccountURL, out); r.status != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), "sign_in_required") {
		t.Errorf("signed out: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	wantNoViolation(t, s, rt)
}

func TestAccountTokenOfAnotherCompany(t *testing.T) {
	_, _, a, c := newSignInCompany(t, nil)
	_, _, at := signedInDana(a, c, "poppy:read")
	other, rt := newRecorded(t, &poppytest.Options{Domain: "shop.test", Now: c.Now})
	b := newAgent(t, other, c.Now)
	f := b.clientForm(testClientID, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {at}})
	f.Set("client_assertion", b.sign(b.signKey, nil, false, map[string]any{"iss": testClientID, "sub": testClientID,
		"aud": "https://auth.shop.test/oauth/token", "iat": c.Now().Unix(), "exp": c.Now().Unix() + 60, "jti": jti()}))
	u := "https://auth.shop.test/oauth/token"
	r := b.postForm(u, f, b.proof("POST", u, "", "", nil))
	wantError(t, "another Company's Account Token", r, 400, "invalid_grant")
	wantViolation(t, other, rt, "§4.8", "issued by https://auth.example.com")
}

func TestAccountString(t *testing.T) {
	for _, a := range poppytest.DefaultAccounts() {
		for _, out := range []string{a.String(), a.GoString()} {
			if strings.Contains(out, a.Password) || !strings.Contains(out, a.ID) {
				t.Errorf("Account printed as %q", out)
			}
		}
	}
}

// Poppy 0.1 §4.4: "Once it has been, it can't switch to another". Our
// reading: a Session signed out by revocation still can't sign in to
// another account; the agent starts a new Session.
func TestSignedOutSessionKeepsItsAccount(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sid, _, at := signedInDana(a, c, "poppy:read")
	a.revoke(at)
	d := a.startDevice("poppy:read")
	if err := s.ApproveDevice(d.str("user_code"), "acct_sam"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	wantError(t, "another account after sign-out", a.poll(d.str("device_code"), sid), 400, "account_mismatch")
	again := a.signInDevice(c, sid, "acct_dana", "poppy:read")
	if again.str("session_id") != sid {
		t.Errorf("signing in to the same account again: %v", again.body)
	}
	wantNoViolation(t, s, rt)
}
