package main

// A small Personal Agent written here from the spec, on go-jose, that makes
// one deliberately wrong request per kind of violation against poppytest
// serve, as a test client in another language would.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const testClientID = "https://agent.example/agent.json"

// miniAgent signs assertions and DPoP proofs by hand.
type miniAgent struct {
	t       *testing.T
	c       *http.Client
	sign    *ecdsa.PrivateKey
	dpop    *ecdsa.PrivateKey
	domain  string            // the Company's
	id      string            // the client_id
	nonces  map[string]string // host -> the latest DPoP-Nonce
	session string            // a DPoP Session Token, once started
}

// newMiniAgent makes an agent with its keys for the Company at domain.
func newMiniAgent(t *testing.T, s *served, clientID, domain string) *miniAgent {
	t.Helper()
	a := &miniAgent{t: t, c: curlLike(t, s.in), domain: domain, id: clientID, nonces: map[string]string{}}
	for _, k := range []**ecdsa.PrivateKey{&a.sign, &a.dpop} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		*k = key
	}
	return a
}

// docs are the agent's client metadata document and key set.
func (a *miniAgent) docs() agentDocs {
	u, _ := url.Parse(a.id)
	client, _ := json.Marshal(map[string]any{"client_id": a.id, "client_name": "Mini Agent",
		"jwks_uri": "https://" + u.Host + "/jwks.json", "redirect_uris": []string{"https://" + u.Host + "/cb"},
		"token_endpoint_auth_method": "private_key_jwt"})
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &a.sign.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	return agentDocs{Client: client, JWKS: jwks}
}

// register serves the agent's documents from the run.
func (a *miniAgent) register(s *served, run string) {
	a.t.Helper()
	if status := s.admin(a.t, "PUT", "/admin/runs/"+run+"/agent", a.docs(), nil); status != 200 {
		a.t.Fatalf("registering the mini agent with run %s: %d", run, status)
	}
}

func randomID() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// jws signs claims with key and header fields.
func (a *miniAgent) jws(key *ecdsa.PrivateKey, header map[jose.HeaderKey]any, embedJWK bool, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, &jose.SignerOptions{ExtraHeaders: header, EmbedJWK: embedJWK})
	if err != nil {
		a.t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := signer.Sign(payload)
	if err != nil {
		a.t.Fatal(err)
	}
	out, _ := obj.CompactSerialize()
	return out
}

// assertion is a client assertion (iss=sub=client_id) or, with sub set, a
// §4.2 Session assertion.
func (a *miniAgent) assertion(sub string) string {
	now := time.Now().Unix()
	if sub == "" {
		sub = a.id
	}
	return a.jws(a.sign, map[jose.HeaderKey]any{"kid": "k1", "typ": "JWT"}, false, map[string]any{
		"iss": a.id, "sub": sub, "aud": "https://auth." + a.domain + "/oauth/token", "iat": now, "exp": now + 60, "jti": randomID()})
}

// proof is a DPoP proof for method u, with the host's latest nonce and the
// token's hash when token is set.
func (a *miniAgent) proof(method, u, token string) string {
	pu, _ := url.Parse(u)
	c := map[string]any{"jti": randomID(), "htm": method, "htu": pu.Scheme + "://" + pu.Host + pu.Path, "iat": time.Now().Unix()}
	if n := a.nonces[pu.Host]; n != "" {
		c["nonce"] = n
	}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		c["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return a.jws(a.dpop, map[jose.HeaderKey]any{"typ": "dpop+jwt"}, true, c)
}

// do sends req and keeps the nonce of its answer; it returns the status.
func (a *miniAgent) do(req *http.Request) (int, map[string]any) {
	a.t.Helper()
	c := *a.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	if n := resp.Header.Get("DPoP-Nonce"); n != "" {
		a.nonces[req.URL.Host] = n
	}
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v
}

// learnNonce fetches a public document of host, whose answer carries the
// host's DPoP-Nonce.
func (a *miniAgent) learnNonce(host string) {
	req, _ := http.NewRequest("GET", "https://"+host+"/.well-known/poppy.json", nil)
	a.do(req)
}

// form posts form to u, with a proof unless noProof.
func (a *miniAgent) form(u string, form url.Values, proof bool) (int, map[string]any) {
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof {
		req.Header.Set("DPoP", a.proof("POST", u, ""))
	}
	return a.do(req)
}

// clientForm is a form with the client assertion, and extra.
func (a *miniAgent) clientForm(extra url.Values) url.Values {
	f := url.Values{"client_id": {a.id}, "client_assertion": {a.assertion("")},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// startSession gets a DPoP Session Token and its session_id (§4.2).
func (a *miniAgent) startSession() (token, sid string) {
	a.t.Helper()
	a.learnNonce("auth." + a.domain)
	status, v := a.tryStartSession()
	token, _ = v["access_token"].(string)
	sid, _ = v["session_id"].(string)
	if status != 200 || token == "" || sid == "" {
		a.t.Fatalf("starting a Session: %d %v", status, v)
	}
	a.learnNonce("api." + a.domain)
	return token, sid
}

// tryStartSession sends the JWT bearer grant once, with what nonce it has.
func (a *miniAgent) tryStartSession() (int, map[string]any) {
	return a.form("https://auth."+a.domain+"/oauth/token", a.clientForm(url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {a.assertion("usr_mini")}}), true)
}

// authorized sends method u with the Session Token, a proof, and a body
// of contentType.
func (a *miniAgent) authorized(method, u, contentType, body string) (int, map[string]any) {
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "DPoP "+a.session)
	req.Header.Set("DPoP", a.proof(method, u, a.session))
	return a.do(req)
}

// TestViolationKinds: for each kind of violation, one deliberately wrong
// request from the mini agent shows up at GET /admin/violations with its
// section, its request, and no secret.
func TestViolationKinds(t *testing.T) {
	s := startServe(t)
	a := newMiniAgent(t, s, testClientID, "example.com")
	a.register(s, "default")
	a.session, _ = a.startSession()
	const auth, api = "https://auth.example.com", "https://api.example.com"
	for _, tc := range []struct {
		section, path string
		wrong         func()
	}{
		{"4.1", "/oauth/token", func() {
			a.form(auth+"/oauth/token", a.clientForm(url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
				"assertion": {a.assertion("usr_mini")}, "client_assertion_type": {"urn:nope"}}), true)
		}},
		{"4.2", "/oauth/token", func() {
			a.form(auth+"/oauth/token", a.clientForm(url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}}), true)
		}},
		{"4.3", "/poppy/whoami", func() { a.authorized("GET", api+"/poppy/whoami?access_token="+a.session, "", "") }},
		{"4.3", "/products", func() {
			s.admin(t, "POST", "/admin/runs/default/faults/rate_limit", map[string]any{"host": "www.example.com", "path": "/products", "count": 1, "retry_after": "30s"}, nil)
			for range 2 { // the second does not wait for Retry-After
				req, _ := http.NewRequest("GET", "https://www.example.com/products", nil)
				a.do(req)
			}
		}},
		{"4.5", "/oauth/authorize", func() {
			req, _ := http.NewRequest("GET", auth+"/oauth/authorize?"+url.Values{"client_id": {a.id}, "redirect_uri": {"https://agent.example/cb"},
				"response_type": {"code"}, "scope": {"poppy:read"}}.Encode(), nil)
			a.do(req)
		}},
		{"4.6", "/oauth/device", func() { a.form(auth+"/oauth/device", a.clientForm(nil), false) }},
		{"4.7", "/poppy/sign-in", func() { a.authorized("POST", auth+"/poppy/sign-in", "text/plain", "email=dana") }},
		{"4.8", "/oauth/token", func() {
			a.form(auth+"/oauth/token", a.clientForm(url.Values{"grant_type": {"refresh_token"}}), true)
		}},
		{"4.9", "/oauth/revoke", func() { a.form(auth+"/oauth/revoke", a.clientForm(nil), false) }},
		{"5", "/poppy/browser-session", func() {
			req, _ := http.NewRequest("POST", "https://example.com/poppy/browser-session", strings.NewReader("assertion=x"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Mode", "cors")
			a.do(req)
		}},
		{"7.2", "/poppy/conversations", func() { a.authorized("POST", api+"/poppy/conversations", "text/plain", "hello") }},
		{"7.3", "/poppy/conversations", func() { a.authorized("POST", api+"/poppy/conversations", "application/json", `{"message": 5}`) }},
		{"7.4", "/poppy/conversations", func() {
			a.authorized("POST", api+"/poppy/conversations", "application/json", `{"message": {"id": "m1", "sender": "agent", "context": 5}}`)
		}},
		{"7.8", "/poppy/conversations", func() {
			a.authorized("POST", api+"/poppy/conversations", "application/json", `{"message": {"id": "m2", "sender": "robot", "text": "hi"}}`)
		}},
	} {
		t.Run(fmt.Sprintf("§%s %s", tc.section, tc.path), func(t *testing.T) {
			before := len(s.violations(t, "default"))
			tc.wrong()
			got := s.violations(t, "default")[before:]
			if len(got) == 0 || got[0].Section != tc.section || got[0].Request.Path != tc.path || got[0].Seq != before+1 {
				t.Fatalf("new violations %+v, want §%s at %s", got, tc.section, tc.path)
			}
			b, _ := json.Marshal(got)
			if strings.Contains(string(b), a.session) || strings.Contains(string(b), "eyJ") {
				t.Errorf("a violation shows a secret: %s", b)
			}
		})
	}
	// §6 in a run of its own, whose scenario has an API with a JSON body.
	const scenario = `{"name": "six", "scenario": {"apis": [{"name": "notes", "operations": [{"id": "addNote", "method": "POST",
		"path": "/notes", "request_body": {"type": "object"}, "response": {"status": 201}}]}]}}`
	if status := s.admin(t, "POST", "/admin/runs", json.RawMessage(scenario), nil); status != 201 {
		t.Fatalf("creating run six: %d", status)
	}
	six := *a
	six.domain, six.nonces = "six.poppytest.test", map[string]string{}
	six.session, _ = six.startSession()
	if status, _ := six.authorized("POST", "https://api.six.poppytest.test/notes/notes", "text/plain", "{}"); status != 400 {
		t.Errorf("a body the document does not describe: %d", status)
	}
	if v := s.violations(t, "six"); len(v) != 1 || v[0].Section != "6" || v[0].Request.Host != "api.six.poppytest.test" {
		t.Errorf("run six: %+v", v)
	}
	var all struct {
		Violations []runViolation `json:"violations"`
	}
	s.admin(t, "GET", "/admin/violations", nil, &all)
	if len(all.Violations) < 12 || all.Violations[0].Run != "default" {
		t.Errorf("GET /admin/violations has %d", len(all.Violations))
	}
}

// TestRunsSideBySide: two runs, each bound to its own agent, do not
// disturb each other: one's options and faults leave the other as it was,
// an agent that comes to the other's Company is refused without a
// violation, and each run has only its own violations.
func TestRunsSideBySide(t *testing.T) {
	s := startServe(t)
	a := newMiniAgent(t, s, "https://agent.a.test/agent.json", "a.poppytest.test")
	b := newMiniAgent(t, s, "https://agent.b.test/agent.json", "b.poppytest.test")
	for _, x := range []struct {
		name    string
		agent   *miniAgent
		options string
	}{{"a", a, `{"no_nonce": true}`}, {"b", b, `{}`}} {
		body := map[string]any{"name": x.name, "client_id": x.agent.id, "agent": x.agent.docs(), "options": json.RawMessage(x.options)}
		if status := s.admin(t, "POST", "/admin/runs", body, nil); status != 201 {
			t.Fatalf("creating run %s: %d", x.name, status)
		}
	}
	if status, v := a.tryStartSession(); status != 200 {
		t.Errorf("run a takes proofs without a nonce: %d %v", status, v)
	}
	if status, v := b.tryStartSession(); status != 400 || v["error"] != "use_dpop_nonce" {
		t.Errorf("run b, without a's no_nonce: %d %v", status, v)
	}
	b.learnNonce("auth.b.poppytest.test")
	s.admin(t, "POST", "/admin/runs/a/faults/rotate_nonce", map[string]any{}, nil)
	if status, v := b.tryStartSession(); status != 200 {
		t.Errorf("run b after a fault of run a: %d %v", status, v)
	}
	stray := *b
	stray.domain = "a.poppytest.test"
	if status, v := stray.tryStartSession(); status != 401 || v["error"] != "invalid_client" {
		t.Errorf("b's agent at a's Company: %d %v", status, v)
	}
	a.form("https://auth.a.poppytest.test/oauth/revoke", a.clientForm(nil), false) // §4.9: no token
	if va, vb := s.violations(t, "a"), s.violations(t, "b"); len(va) != 1 || va[0].Section != "4.9" || len(vb) != 0 {
		t.Errorf("violations: a %+v, b %+v", va, vb)
	}
}

// TestDirectSignInThroughAdmin: a test suite plays the User of a Direct
// Sign-In: it finds the request by its state, approves it, and hands
// redirect_url to the agent, which exchanges the code (§4.5) and is signed
// in, with no violation.
func TestDirectSignInThroughAdmin(t *testing.T) {
	s := startServe(t)
	a := newMiniAgent(t, s, testClientID, "example.com")
	a.register(s, "default")
	_, sid := a.startSession()
	verifier := randomID() + randomID()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {"https://agent.example/cb"}, "scope": {"poppy:read"},
		"state": {"st-" + randomID()}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	req, _ := http.NewRequest("GET", "https://auth.example.com/oauth/authorize?"+q.Encode(), nil)
	if status, _ := a.do(req); status != 200 {
		t.Fatalf("the consent page: %d", status)
	}
	var pending struct {
		Authorizations []struct {
			State string `json:"state"`
		} `json:"authorizations"`
	}
	s.admin(t, "GET", "/admin/runs/default/authorizations", nil, &pending)
	if len(pending.Authorizations) != 1 || pending.Authorizations[0].State != q.Get("state") {
		t.Fatalf("authorizations %+v", pending)
	}
	var approved struct {
		RedirectURL string `json:"redirect_url"`
	}
	path := "/admin/runs/default/authorizations/" + url.PathEscape(q.Get("state")) + "/approve"
	if status := s.admin(t, "POST", path, map[string]string{"account": "acct_dana"}, &approved); status != 200 {
		t.Fatalf("approving: %d", status)
	}
	back, err := url.Parse(approved.RedirectURL)
	if err != nil || back.Query().Get("state") != q.Get("state") || back.Query().Get("iss") != "https://auth.example.com" {
		t.Fatalf("redirect_url %q", approved.RedirectURL)
	}
	status, v := a.form("https://auth.example.com/oauth/token", a.clientForm(url.Values{"grant_type": {"authorization_code"},
		"code": {back.Query().Get("code")}, "redirect_uri": {"https://agent.example/cb"}, "code_verifier": {verifier}, "session_id": {sid}}), true)
	if status != 200 || v["signed_in"] != true {
		t.Errorf("exchanging the code: %d %v", status, v)
	}
	if got := s.violations(t, "default"); len(got) != 0 {
		t.Errorf("violations %+v", got)
	}
}

// TestMediatedRedirectOption: a run with mediated_redirect answers a
// mediated post with that redirect to poppytest.MediatedMovedPath, so an
// agent tested through serve can be caught following it (§4.7), as Go
// tests catch it with Options.MediatedRedirect.
func TestMediatedRedirectOption(t *testing.T) {
	s := startServe(t)
	a := newMiniAgent(t, s, "https://agent.m.test/agent.json", "m.poppytest.test")
	body := map[string]any{"name": "m", "client_id": a.id, "agent": a.docs(), "options": json.RawMessage(`{"mediated_redirect": 307}`)}
	if status := s.admin(t, "POST", "/admin/runs", body, nil); status != 201 {
		t.Fatalf("creating run m: %d", status)
	}
	a.learnNonce("auth.m.poppytest.test")
	a.session, _ = a.startSession()
	u := "https://auth.m.poppytest.test/poppy/sign-in"
	a.learnNonce("auth.m.poppytest.test")
	req, _ := http.NewRequest("POST", u, strings.NewReader(`{"email": "dana@example.com", "password": "x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "DPoP "+a.session)
	req.Header.Set("DPoP", a.proof("POST", u, a.session))
	c := *a.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTemporaryRedirect || !strings.HasSuffix(res.Header.Get("Location"), "/poppy/sign-in-moved") {
		t.Errorf("mediated post with mediated_redirect 307: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
}
