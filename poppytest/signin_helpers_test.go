package poppytest_test

// Helpers of the sign-in tests: the raw agent's requests to the device,
// authorization, mediated and revocation endpoints, written from the spec.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const (
	testDeviceURL    = "https://auth.example.com/oauth/device"
	testVerifyURL    = "https://auth.example.com/device"
	testAuthorizeURL = "https://auth.example.com/oauth/authorize"
	testMediatedURL  = "https://auth.example.com/poppy/sign-in"
	testRevokeURL    = "https://auth.example.com/oauth/revoke"
	testAccountURL   = "https://api.example.com/account"
	testRedirectURI  = "https://agent.example/oauth/callback"
	otherClientID    = "https://agent.example/other.json"
	grantDevice      = "urn:ietf:params:oauth:grant-type:device_code"
)

// newSignInCompany is newTestCompany with a one-second device interval.
func newSignInCompany(t *testing.T, opts *poppytest.Options) (*poppytest.Server, *recordingT, *rawAgent, *clock) {
	t.Helper()
	o := poppytest.Options{DeviceInterval: time.Second}
	if opts != nil {
		o = *opts
		if o.DeviceInterval == 0 {
			o.DeviceInterval = time.Second
		}
	}
	return newTestCompany(t, &o)
}

// clientForm is a form with the client assertion of clientID, and extra.
func (a *rawAgent) clientForm(clientID string, extra url.Values) url.Values {
	now := a.now().Unix()
	assertion := a.sign(a.signKey, map[jose.HeaderKey]any{"kid": "k1", "typ": "JWT"}, false, map[string]any{
		"iss": clientID, "sub": clientID, "aud": testTokenURL, "iat": now, "exp": now + 60, "jti": jti()})
	f := url.Values{
		"client_id":             {clientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {assertion},
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// publishOther serves a second agent, otherClientID, with the same keys.
func (a *rawAgent) publishOther() {
	doc, _ := json.Marshal(map[string]any{"client_id": otherClientID, "client_name": "Other Agent",
		"jwks_uri": "https://agent.example/jwks.json", "redirect_uris": []string{testRedirectURI}})
	a.s.SetDocument("agent.example", "/other.json", 200, http.Header{"Content-Type": {"application/json"}}, doc)
}

// postForm posts form to u with proof ("" for none).
func (a *rawAgent) postForm(u string, form url.Values, proof string) response {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	return a.do(req)
}

// tokenProof is a fresh proof for the token endpoint.
func (a *rawAgent) tokenProof() string { return a.proof("POST", testTokenURL, "", "", nil) }

// startDevice starts a Device Sign-In for scope and wants 200.
func (a *rawAgent) startDevice(scope string) response {
	a.t.Helper()
	r := a.postForm(testDeviceURL, a.clientForm(testClientID, url.Values{"scope": {scope}}), "")
	if r.status != 200 {
		a.t.Fatalf("device authorization: %d %v", r.status, r.body)
	}
	return r
}

// poll asks the token endpoint about a device request, for Session sid.
func (a *rawAgent) poll(deviceCode, sid string) response {
	a.t.Helper()
	return a.postToken(a.clientForm(testClientID, url.Values{"grant_type": {grantDevice},
		"device_code": {deviceCode}, "session_id": {sid}}), a.tokenProof())
}

// signInDevice signs Session sid in to account by Device Sign-In and
// returns the token response.
func (a *rawAgent) signInDevice(c *clock, sid, account, scope string) response {
	a.t.Helper()
	d := a.startDevice(scope)
	if err := a.s.ApproveDevice(d.str("user_code"), account); err != nil {
		a.t.Fatal(err)
	}
	c.Advance(time.Second)
	r := a.poll(d.str("device_code"), sid)
	if r.status != 200 || r.body["signed_in"] != true {
		a.t.Fatalf("device sign-in: %d %v", r.status, r.body)
	}
	return r
}

// refresh sends the refresh_token grant with extra, with a proof.
func (a *rawAgent) refresh(accountToken string, extra url.Values) response {
	a.t.Helper()
	f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {accountToken}}
	for k, v := range extra {
		f[k] = v
	}
	return a.postToken(a.clientForm(testClientID, f), a.tokenProof())
}

// revoke revokes a token at the revocation endpoint.
func (a *rawAgent) revoke(token string) response {
	a.t.Helper()
	return a.postForm(testRevokeURL, a.clientForm(testClientID, url.Values{"token": {token}, "token_type_hint": {"refresh_token"}}), "")
}

// getWithToken GETs u with a DPoP Session Token and a fresh proof.
func (a *rawAgent) getWithToken(u, token string) response {
	a.t.Helper()
	return a.call("GET", u, "DPoP", token, a.proof("GET", u, token, "", nil))
}

// postJSON posts body as JSON to u with a DPoP Session Token.
func (a *rawAgent) postJSON(u, token, contentType string, body any) response {
	a.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "DPoP "+token)
	req.Header.Set("DPoP", a.proof("POST", u, token, "", nil))
	return a.do(req)
}

// mediated posts a §4.7 sign-in request with the Session Token.
func (a *rawAgent) mediated(token string, body map[string]any) response {
	a.t.Helper()
	return a.postJSON(testMediatedURL, token, "application/json", body)
}

// pkce returns a code verifier and its S256 challenge (RFC 7636 §4.1, §4.2).
func pkce() (verifier, challenge string) {
	verifier = jti() + jti()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeURL is a Direct Sign-In authorization URL, with extra set over it.
func authorizeURL(state, challenge, scope string, extra url.Values) string {
	q := url.Values{"response_type": {"code"}, "client_id": {testClientID}, "redirect_uri": {testRedirectURI},
		"scope": {scope}, "state": {state}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	for k, v := range extra {
		q[k] = v
	}
	return testAuthorizeURL + "?" + q.Encode()
}

// noRedirect does req with the Server's client without following redirects.
func noRedirect(t *testing.T, s *poppytest.Server, req *http.Request) (*http.Response, string) {
	t.Helper()
	c := *s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp, b.String()
}

// getPage GETs u without following redirects and returns the answer.
func getPage(t *testing.T, s *poppytest.Server, u string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return noRedirect(t, s, req)
}

// postPage posts a page form to u without following redirects.
func postPage(t *testing.T, s *poppytest.Server, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return noRedirect(t, s, req)
}

// query parses the query of a redirect URL.
func query(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// wantError fails unless r is the OAuth error code with status.
func wantError(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.str("error") != code {
		t.Errorf("%s: %d %v, want %d %s", what, r.status, r.body, status, code)
	}
}
