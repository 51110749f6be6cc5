package poppytest_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// exchange sends the authorization_code grant with extra set over it.
func (a *rawAgent) exchange(code, verifier, sid string, extra url.Values) response {
	a.t.Helper()
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {testRedirectURI},
		"code_verifier": {verifier}, "session_id": {sid}}
	for k, v := range extra {
		f[k] = v
	}
	return a.postToken(a.clientForm(testClientID, f), a.tokenProof())
}

// approvedCode runs the authorization request through ApproveAuthorization
// and returns the code and verifier.
func (a *rawAgent) approvedCode(state, account, scope string) (code, verifier string) {
	a.t.Helper()
	verifier, challenge := pkce()
	if resp, page := getPage(a.t, a.s, authorizeURL(state, challenge, scope, nil)); resp.StatusCode != 200 {
		a.t.Fatalf("authorization request: %d\n%s", resp.StatusCode, page)
	}
	to, err := a.s.ApproveAuthorization(state, account)
	if err != nil {
		a.t.Fatal(err)
	}
	return query(a.t, to).Get("code"), verifier
}

func TestDirectSignIn(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	sid := a.startSession().str("session_id")
	verifier, challenge := pkce()
	resp, page := getPage(t, s, authorizeURL("Xq81vR", challenge, "poppy:read poppy:write addresses", nil))
	if resp.StatusCode != 200 || !strings.Contains(page, "Raw Agent") || !strings.Contains(page, "addresses: Manage saved shipping addresses") {
		t.Fatalf("consent page: %d\n%s", resp.StatusCode, page)
	}
	to, err := s.ApproveAuthorization("Xq81vR", "acct_dana", "poppy:read", "addresses")
	if err != nil {
		t.Fatal(err)
	}
	q := query(t, to)
	if !strings.HasPrefix(to, testRedirectURI+"?") || q.Get("state") != "Xq81vR" || q.Get("iss") != "https://auth.example.com" || q.Get("code") == "" {
		t.Fatalf("redirect %s", to)
	}
	if _, err := s.ApproveAuthorization("Xq81vR", "acct_dana"); err == nil {
		t.Errorf("a request was approved twice")
	}
	r := a.exchange(q.Get("code"), verifier, sid, nil)
	if r.status != 200 || r.str("scope") != "poppy:read addresses" || r.body["signed_in"] != true ||
		r.str("session_id") != sid || !strings.HasPrefix(r.str("refresh_token"), "pat_") {
		t.Fatalf("code exchange: %d %v", r.status, r.body)
	}
	for _, v := range []string{verifier, q.Get("code"), r.str("refresh_token")} {
		if !slices.Contains(s.IssuedSecrets(), v) {
			t.Errorf("IssuedSecrets lacks the verifier, the code or the Account Token")
		}
	}
	signedIn := r.str("access_token")
	if who := a.whoami(signedIn, ""); who.str("account") != "acct_dana" {
		t.Errorf("whoami %v", who.body)
	}
	wantNoViolation(t, s, rt)

	// RFC 6749 §4.1.2: a reused code is refused, and the tokens issued for it revoked.
	wantError(t, "reused code", a.exchange(q.Get("code"), verifier, sid, nil), 400, "invalid_grant")
	wantViolation(t, s, rt, "§4.5", "used before")
	if who := a.whoami(signedIn, ""); who.body["signed_in"] != false {
		t.Errorf("whoami after the code's reuse: %v", who.body)
	}
	if r := a.refresh(r.str("refresh_token"), nil); r.str("error") != "invalid_grant" {
		t.Errorf("Account Token of a reused code: %d %v", r.status, r.body)
	}
}

func TestDirectConsentPage(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	sid := a.startSession().str("session_id")
	verifier, challenge := pkce()
	_, page := getPage(t, s, authorizeURL("st1", challenge, "poppy:read poppy:write", url.Values{"redirect_uri": {testRedirectURI}}))
	m := strings.SplitN(page, `name="request" value="`, 2)
	if len(m) != 2 {
		t.Fatalf("no request field on the page:\n%s", page)
	}
	reqID, _, _ := strings.Cut(m[1], `"`)
	form := url.Values{"request": {reqID}, "email": {"sam@example.com"}, "password": {"nope"}, "scope": {"poppy:write"}, "action": {"approve"}}
	if resp, _ := postPage(t, s, testAuthorizeURL, form); resp.StatusCode != 401 {
		t.Errorf("wrong password: %d", resp.StatusCode)
	}
	form.Set("password", "sam-secret-42")
	resp, _ := postPage(t, s, testAuthorizeURL, form)
	q := query(t, resp.Header.Get("Location"))
	if resp.StatusCode != 303 || q.Get("code") == "" || q.Get("state") != "st1" || q.Get("iss") != "https://auth.example.com" {
		t.Fatalf("approve: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if r := a.exchange(q.Get("code"), verifier, sid, nil); r.status != 200 || r.str("scope") != "poppy:write" {
		t.Errorf("exchange: %d %v", r.status, r.body)
	}
	if resp, _ := postPage(t, s, testAuthorizeURL, form); resp.StatusCode != 400 {
		t.Errorf("answering a request twice: %d", resp.StatusCode)
	}

	_, challenge = pkce()
	getPage(t, s, authorizeURL("st2", challenge, "poppy:read", nil))
	to, err := s.DenyAuthorization("st2")
	if q := query(t, to); err != nil || q.Get("error") != "access_denied" || q.Get("state") != "st2" || q.Get("iss") != "https://auth.example.com" || q.Has("code") {
		t.Errorf("deny: %q, %v", to, err)
	}
	if _, err := s.DenyAuthorization("st-unknown"); err == nil {
		t.Errorf("DenyAuthorization of an unknown state succeeded")
	}
	wantNoViolation(t, s, rt)
}

func TestAuthorizeRequestRejections(t *testing.T) {
	_, challenge := pkce()
	for _, tc := range []struct {
		name      string
		extra     url.Values
		status    int    // of the page; 303 redirects back with error
		code      string // error on the redirect, or on the page
		violation string
	}{
		{"redirect_uri elsewhere", url.Values{"redirect_uri": {"https://agent.example/other"}}, 400, "invalid_request", "redirect_uris"},
		{"no client_id", url.Values{"client_id": {""}}, 400, "invalid_request", "client_id"},
		{"response_type token", url.Values{"response_type": {"token"}}, 303, "unsupported_response_type", "response_type"},
		{"no state", url.Values{"state": {""}}, 303, "invalid_request", "without state"},
		{"plain PKCE", url.Values{"code_challenge_method": {"plain"}}, 303, "invalid_request", "S256"},
		{"no PKCE", url.Values{"code_challenge": {""}, "code_challenge_method": {""}}, 303, "invalid_request", "S256"},
		{"challenge not a hash", url.Values{"code_challenge": {"abc"}}, 303, "invalid_request", "SHA-256"},
		{"no scope", url.Values{"scope": {""}}, 303, "invalid_scope", "without scope"},
		{"unknown scope", url.Values{"scope": {"poppy:admin"}}, 303, "invalid_scope", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, _, _ := newSignInCompany(t, nil)
			resp, page := getPage(t, s, authorizeURL("st", challenge, "poppy:read", tc.extra))
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d\n%s", resp.StatusCode, tc.status, page)
			}
			if tc.status == 303 {
				q := query(t, resp.Header.Get("Location"))
				if q.Get("error") != tc.code || q.Get("iss") != "https://auth.example.com" || !strings.HasPrefix(resp.Header.Get("Location"), testRedirectURI) {
					t.Errorf("redirect %q, want error %s", resp.Header.Get("Location"), tc.code)
				}
			} else if !strings.Contains(page, tc.code) || resp.Header.Get("Location") != "" {
				t.Errorf("page %q, want %s and no redirect", page, tc.code)
			}
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§4.5", tc.violation)
			}
		})
	}
}

func TestCodeExchangeRejections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		send      func(a *rawAgent, c *clock, sid, code, verifier string) response
		code      string
		violation string
	}{
		{"wrong verifier", func(a *rawAgent, _ *clock, sid, code, _ string) response {
			v, _ := pkce()
			return a.exchange(code, v, sid, nil)
		}, "invalid_grant", "code_verifier"},
		{"no verifier", func(a *rawAgent, _ *clock, sid, code, _ string) response {
			return a.exchange(code, "", sid, nil)
		}, "invalid_grant", "code_verifier"},
		{"other redirect_uri", func(a *rawAgent, _ *clock, sid, code, v string) response {
			return a.exchange(code, v, sid, url.Values{"redirect_uri": {"https://agent.example/oauth/cb2"}})
		}, "invalid_grant", "redirect_uri"},
		{"no session_id", func(a *rawAgent, _ *clock, _, code, v string) response {
			return a.exchange(code, v, "", nil)
		}, "invalid_request", "without session_id"},
		{"no code", func(a *rawAgent, _ *clock, sid, _, v string) response {
			return a.exchange("", v, sid, nil)
		}, "invalid_request", "without code"},
		{"another client", func(a *rawAgent, _ *clock, sid, code, v string) response {
			a.publishOther()
			return a.postToken(a.clientForm(otherClientID, url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {testRedirectURI}, "code_verifier": {v}, "session_id": {sid}}), a.tokenProof())
		}, "invalid_grant", "another client"},
		{"another client's Session", func(a *rawAgent, _ *clock, _, code, v string) response {
			a.publishOther()
			other := a.postToken(a.clientForm(otherClientID, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
				"assertion": {a.sessionAssertion("JWT", func(c map[string]any) { c["iss"] = otherClientID })}}), a.tokenProof())
			return a.exchange(code, v, other.str("session_id"), nil)
		}, "invalid_session", "another client_id"},
		{"expired code", func(a *rawAgent, c *clock, sid, code, v string) response {
			c.Advance(10 * time.Minute)
			return a.exchange(code, v, sid, nil)
		}, "invalid_grant", ""},
		{"unknown code", func(a *rawAgent, _ *clock, sid, _, v string) response {
			return a.exchange("SplxlOBeZQQYbYS6WxSbIA", v, sid, nil)
		}, "invalid_grant", ""},
		{"ended Session", func(a *rawAgent, _ *clock, sid, code, v string) response {
			a.s.EndSession(sid)
			return a.exchange(code, v, sid, nil)
		}, "invalid_session", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, c := newSignInCompany(t, nil)
			sid := a.startSession().str("session_id")
			code, verifier := a.approvedCode("st", "acct_dana", "poppy:read")
			wantError(t, tc.name, tc.send(a, c, sid, code, verifier), 400, tc.code)
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, tc.violation)
			}
			if len(s.SignedInSessions()) != 0 {
				t.Errorf("a refused exchange signed a Session in: %+v", s.SignedInSessions())
			}
		})
	}
}
