package poppytest_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// newTestCompany starts a Server on a settable clock, reporting to a
// recordingT, with a raw agent published on it.
func newTestCompany(t *testing.T, opts *poppytest.Options) (*poppytest.Server, *recordingT, *rawAgent, *clock) {
	t.Helper()
	c := newClock()
	o := poppytest.Options{}
	if opts != nil {
		o = *opts
	}
	o.Now = c.Now
	s, rt := newRecorded(t, &o)
	return s, rt, newAgent(t, s, c.Now), c
}

func TestStartSessionAndWhoami(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	r := a.startSession()
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("token response Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
	tok, sid := r.str("access_token"), r.str("session_id")
	if r.str("token_type") != "DPoP" || r.body["expires_in"] != 3600.0 || r.body["scope"] != "" ||
		r.body["signed_in"] != false || !strings.HasPrefix(sid, "ses_") || tok == "" {
		t.Errorf("token response %v", r.body)
	}
	who := a.whoami(tok, "")
	want := map[string]any{"session_id": sid, "client_id": testClientID, "user_id": "usr_Q7c1vK",
		"signed_in": false, "scopes": nil, "token_type": "DPoP"}
	if diff := cmp.Diff(want, who.body); who.status != 200 || diff != "" {
		t.Errorf("whoami %d (-want +got):\n%s", who.status, diff)
	}
	sessions := s.Sessions()
	if len(sessions) != 1 || sessions[0].ID != sid || sessions[0].UserID != "usr_Q7c1vK" || sessions[0].SignedIn {
		t.Errorf("Sessions() = %+v", sessions)
	}
	secrets := s.IssuedSecrets()
	if !slices.Contains(secrets, tok) || len(secrets) != 3 { // token, client assertion, Session assertion
		t.Errorf("IssuedSecrets has %d entries, want the token and both assertions", len(secrets))
	}
	if s.Served("session_token") != 1 {
		t.Errorf("Served(session_token) = %d", s.Served("session_token"))
	}
	wantNoViolation(t, s, rt)
}

func TestRenewAndEndSession(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	first := a.startSession()
	sid := first.str("session_id")
	renew := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.proof("POST", testTokenURL, "", "", nil))
	if renew.status != 200 || renew.str("session_id") != sid || renew.str("access_token") == first.str("access_token") {
		t.Fatalf("renew: %d %v", renew.status, renew.body)
	}
	if got := a.whoami(renew.str("access_token"), ""); got.status != 200 {
		t.Errorf("renewed token: %d %v", got.status, got.body)
	}
	if len(s.Sessions()) != 1 {
		t.Errorf("renewal made a new Session: %+v", s.Sessions())
	}
	if !s.EndSession(sid) || s.EndSession("ses_nope") {
		t.Fatalf("EndSession results wrong")
	}
	if got := a.whoami(renew.str("access_token"), ""); got.status != 401 ||
		!strings.Contains(got.header.Get("WWW-Authenticate"), `DPoP error="invalid_token"`) {
		t.Errorf("token of an ended Session: %d %q", got.status, got.header.Get("WWW-Authenticate"))
	}
	again := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.proof("POST", testTokenURL, "", "", nil))
	if again.status != 400 || again.str("error") != "invalid_session" {
		t.Errorf("renewing an ended Session: %d %v", again.status, again.body)
	}
	wantNoViolation(t, s, rt)
}

func TestRenewOtherUsersSession(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	sid := a.startSession().str("session_id")
	a.userID = "usr_other"
	r := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.proof("POST", testTokenURL, "", "", nil))
	if r.str("error") != "invalid_session" {
		t.Errorf("renewing another User's Session: %d %v", r.status, r.body)
	}
	wantViolation(t, s, rt, "§4.2", "belongs to another client_id or User")
}

// TestTokenRequestRejections sends one bad token request at a time and
// checks the answer and the violation each one records.
func TestTokenRequestRejections(t *testing.T) {
	type build func(a *rawAgent) (url.Values, string)
	good := func(a *rawAgent) (url.Values, string) {
		return a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil)
	}
	withProof := func(mut func(map[string]any)) build {
		return func(a *rawAgent) (url.Values, string) {
			return a.grantForm(nil), a.proof("POST", testTokenURL, "", "", mut)
		}
	}
	withAssertion := func(typ string, mut func(map[string]any)) build {
		return func(a *rawAgent) (url.Values, string) {
			f, p := good(a)
			f.Set("assertion", a.sessionAssertion(typ, mut))
			return f, p
		}
	}
	withClientAssertion := func(mut func(map[string]any)) build {
		return func(a *rawAgent) (url.Values, string) {
			f, p := good(a)
			f.Set("client_assertion", a.clientAssertion(mut))
			return f, p
		}
	}
	for _, tc := range []struct {
		name      string
		build     build
		code      string
		violation string // "" for none
	}{
		{"wrong htu", withProof(func(c map[string]any) { c["htu"] = "https://auth.example.com/other" }), "invalid_dpop_proof", "htu"},
		{"htu with query", withProof(func(c map[string]any) { c["htu"] = testTokenURL + "?x=1" }), "invalid_dpop_proof", "without query"},
		{"wrong htm", withProof(func(c map[string]any) { c["htm"] = "GET" }), "invalid_dpop_proof", "htm"},
		{"ath at token endpoint", withProof(func(c map[string]any) { c["ath"] = "abc" }), "invalid_dpop_proof", "has ath"},
		{"old proof", withProof(func(c map[string]any) { c["iat"] = c["iat"].(int64) - 300 }), "invalid_dpop_proof", "outside"},
		{"no proof", func(a *rawAgent) (url.Values, string) { return a.grantForm(nil), "" }, "invalid_dpop_proof", "without a DPoP proof"},
		{"aud array", withAssertion("JWT", func(c map[string]any) { c["aud"] = []string{testTokenURL} }), "invalid_grant", "single string"},
		{"aud issuer", withAssertion("JWT", func(c map[string]any) { c["aud"] = "https://auth.example.com" }), "invalid_grant", "not the token_endpoint"},
		{"expired assertion", withAssertion("JWT", func(c map[string]any) { c["iat"], c["exp"] = c["iat"].(int64)-120, c["iat"].(int64)-60 }), "invalid_grant", "expired"},
		{"long-lived assertion", withAssertion("JWT", func(c map[string]any) { c["exp"] = c["iat"].(int64) + 600 }), "invalid_grant", "more than"},
		{"no iat", withAssertion("JWT", func(c map[string]any) { delete(c, "iat") }), "invalid_grant", "no iat"},
		{"short jti", withAssertion("JWT", func(c map[string]any) { c["jti"] = "abc" }), "invalid_grant", "128 bits"},
		{"other iss", withAssertion("JWT", func(c map[string]any) { c["iss"] = "https://agent.example/other.json" }), "invalid_grant", "authenticated client_id"},
		{"email User ID", withAssertion("JWT", func(c map[string]any) { c["sub"] = "dana@example.org" }), "invalid_grant", "email"},
		{"browser assertion", withAssertion("poppy-browser+jwt", nil), "invalid_grant", "§5"},
		{"other typ", withAssertion("at+jwt", nil), "invalid_grant", ""},
		{"client assertion aud", withClientAssertion(func(c map[string]any) { c["aud"] = "https://auth.example.org/token" }), "invalid_client", "aud"},
		{"client assertion sub", withClientAssertion(func(c map[string]any) { c["sub"] = "usr_Q7c1vK" }), "invalid_client", "must both be the client_id"},
		{"client assertion 1 h", withClientAssertion(func(c map[string]any) { c["exp"] = c["iat"].(int64) + 3600 }), "invalid_client", "more than"},
		{"client assertion no jti", withClientAssertion(func(c map[string]any) { delete(c, "jti") }), "invalid_client", "no jti"},
		{"client_id differs", func(a *rawAgent) (url.Values, string) {
			f, p := good(a)
			f.Set("client_id", "https://agent.example/x.json")
			return f, p
		}, "invalid_client", "differs"},
		{"unsupported grant", func(a *rawAgent) (url.Values, string) {
			f, p := good(a)
			f.Set("grant_type", "password")
			return f, p
		}, "unsupported_grant_type", ""},
		{"unknown resource", func(a *rawAgent) (url.Values, string) {
			f, p := good(a)
			f.Set("resource", "https://evil.test/mcp")
			return f, p
		}, "invalid_target", "resource"},
		{"scope beyond the Session", func(a *rawAgent) (url.Values, string) {
			f, p := good(a)
			f.Set("scope", "poppy:read")
			return f, p
		}, "invalid_scope", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newTestCompany(t, nil)
			f, p := tc.build(a)
			r := a.postToken(f, p)
			wantStatus := 400
			if tc.code == "invalid_client" {
				wantStatus = 401
			}
			if r.status != wantStatus || r.str("error") != tc.code || r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("answer %d %v, want %d %s", r.status, r.body, wantStatus, tc.code)
			}
			if s.Served(tc.code) != 1 {
				t.Errorf("Served(%s) = %d, want 1", tc.code, s.Served(tc.code))
			}
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, tc.violation)
			}
		})
	}
}

func TestReplaysAreRejected(t *testing.T) {
	for _, tc := range []struct {
		name, code, violation string
		second                func(a *rawAgent, f url.Values, proof string) (url.Values, string)
	}{
		{"proof jti", "invalid_dpop_proof", "proof jti", func(a *rawAgent, f url.Values, proof string) (url.Values, string) {
			return a.grantForm(nil), proof
		}},
		{"Session assertion jti", "invalid_grant", "Session assertion jti", func(a *rawAgent, f url.Values, _ string) (url.Values, string) {
			g := a.grantForm(nil)
			g.Set("assertion", f.Get("assertion"))
			return g, a.proof("POST", testTokenURL, "", "", nil)
		}},
		{"client assertion jti", "invalid_client", "client assertion jti", func(a *rawAgent, f url.Values, _ string) (url.Values, string) {
			g := a.grantForm(nil)
			g.Set("client_assertion", f.Get("client_assertion"))
			return g, a.proof("POST", testTokenURL, "", "", nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newTestCompany(t, nil)
			f, p := a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil)
			if r := a.postToken(f, p); r.status != 200 {
				t.Fatalf("first request: %d %v", r.status, r.body)
			}
			f2, p2 := tc.second(a, f, p)
			if r := a.postToken(f2, p2); r.str("error") != tc.code {
				t.Errorf("replay: %d %v, want %s", r.status, r.body, tc.code)
			}
			wantViolation(t, s, rt, "used before", tc.violation)
		})
	}
}

func TestClientMetadataRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		publish   func(a *rawAgent)
		violation string
	}{
		{"client_id differs", func(a *rawAgent) {
			a.publish(func(d map[string]any) { d["client_id"] = "https://other.example/agent.json" }, a.signKey)
		}, "names client_id"},
		{"jwks_uri http", func(a *rawAgent) {
			a.publish(func(d map[string]any) { d["jwks_uri"] = "http://agent.example/jwks.json" }, a.signKey)
		}, "not an https URL"},
		{"redirect elsewhere", func(a *rawAgent) {
			a.publish(func(d map[string]any) { d["redirect_uris"] = []string{"https://evil.test/cb"} }, a.signKey)
		}, "client_id's domain"},
		{"private key published", func(a *rawAgent) { a.publish(nil, a.signKey /* private */) }, "private member"},
		{"key rotated away", func(a *rawAgent) { a.publish(nil, &newKey(a.t).PublicKey) }, "verifies"},
		{"no documents", func(a *rawAgent) {
			a.s.SetDocument("agent.example", "/agent.json", 404, nil, nil)
		}, "status 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newTestCompany(t, nil)
			tc.publish(a)
			r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil))
			if r.status != 401 || r.str("error") != "invalid_client" {
				t.Errorf("answer %d %v, want 401 invalid_client", r.status, r.body)
			}
			wantViolation(t, s, rt, "§4.1", tc.violation)
		})
	}
}

func TestClientDocumentsCachedAndRefetchedOnNewKey(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	a.startSession()
	a.startSession()
	if n := s.Count("agent.example", "/agent.json"); n != 1 {
		t.Errorf("agent.json fetched %d times for two Sessions, want 1 (cached)", n)
	}
	// Rotate the key behind the cache's back: the Server must fetch again.
	a.signKey = newKey(t)
	jwks := `{"keys":[` + mustJSON(t, &a.signKey.PublicKey) + `]}`
	s.SetDocument("agent.example", "/jwks.json", 200, http.Header{"Content-Type": {"application/json"}}, []byte(jwks))
	a.startSession()
	if n := s.Count("agent.example", "/jwks.json"); n != 2 {
		t.Errorf("jwks.json fetched %d times, want 2 (refetched after a failed signature)", n)
	}
	wantNoViolation(t, s, rt)
}

func TestNonces(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", noNonce, nil))
	nonce := r.header.Get("DPoP-Nonce")
	if r.status != 400 || r.str("error") != "use_dpop_nonce" || nonce == "" {
		t.Fatalf("proof without nonce: %d %v, DPoP-Nonce %q", r.status, r.body, nonce)
	}
	// The agent may retry with the same assertions: only the proof changes.
	f := a.grantForm(nil)
	r = a.postToken(f, a.proof("POST", testTokenURL, "", noNonce, nil))
	r = a.postToken(f, a.proof("POST", testTokenURL, "", r.header.Get("DPoP-Nonce"), nil))
	if r.status != 200 {
		t.Fatalf("retry with nonce: %d %v", r.status, r.body)
	}
	tok := r.str("access_token")
	// The API host has its own nonce.
	w := a.whoami(tok, nonce)
	apiNonce := w.header.Get("DPoP-Nonce")
	if w.status != 401 || !strings.Contains(w.header.Get("WWW-Authenticate"), `error="use_dpop_nonce"`) || apiNonce == "" || apiNonce == nonce {
		t.Fatalf("whoami with the auth host's nonce: %d %q, nonce %q", w.status, w.header.Get("WWW-Authenticate"), apiNonce)
	}
	if w = a.whoami(tok, apiNonce); w.status != 200 || w.header.Get("DPoP-Nonce") != apiNonce {
		t.Fatalf("whoami with its nonce: %d, DPoP-Nonce %q", w.status, w.header.Get("DPoP-Nonce"))
	}
	s.RotateNonce()
	if w = a.whoami(tok, apiNonce); w.status != 401 || w.header.Get("DPoP-Nonce") == apiNonce {
		t.Fatalf("whoami after RotateNonce: %d, DPoP-Nonce %q", w.status, w.header.Get("DPoP-Nonce"))
	}
	if n := s.Served("use_dpop_nonce"); n != 4 {
		t.Errorf("Served(use_dpop_nonce) = %d, want 4", n)
	}
	wantNoViolation(t, s, rt)
}

// TestNoNonce: with Options.NoNonce a proof needs no nonce, and no
// response offers one.
func TestNoNonce(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, &poppytest.Options{NoNonce: true})
	r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", noNonce, nil))
	if r.status != 200 || r.header.Get("DPoP-Nonce") != "" || s.Nonce("auth.example.com") != "" {
		t.Fatalf("proof without nonce under NoNonce: %d %v, DPoP-Nonce %q", r.status, r.body, r.header.Get("DPoP-Nonce"))
	}
	if w := a.whoami(r.str("access_token"), noNonce); w.status != 200 {
		t.Fatalf("whoami without nonce under NoNonce: %d", w.status)
	}
	wantNoViolation(t, s, rt)
}

func TestRateLimit(t *testing.T) {
	s, rt, a, c := newTestCompany(t, nil)
	s.RateLimit("auth.example.com", "/oauth/token", 1, 1500*time.Millisecond)
	r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil))
	if r.status != 429 || r.header.Get("Retry-After") != "2" {
		t.Fatalf("rate limited: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	c.Advance(2 * time.Second)
	if r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil)); r.status != 200 {
		t.Fatalf("after Retry-After: %d %v", r.status, r.body)
	}
	if n := s.Count("auth.example.com", "/oauth/token"); n != 2 || s.Served("rate_limited") != 1 {
		t.Errorf("token endpoint saw %d requests, served %d 429s; want 2 and 1", n, s.Served("rate_limited"))
	}
	wantNoViolation(t, s, rt)

	s.RateLimit("auth.example.com", "/oauth/token", 1, time.Second)
	a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil))
	a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil)) // too early
	wantViolation(t, s, rt, "§4.3", "before Retry-After")
}

func mustJSON(t *testing.T, key any) string {
	t.Helper()
	b, err := (&jose.JSONWebKey{Key: key, KeyID: "k1", Algorithm: "ES256"}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
