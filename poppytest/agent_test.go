package poppytest_test

// A raw, hand-made Personal Agent on go-jose, written from the spec, to drive
// the Server in its own tests. It shares no code with the Server.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const (
	testClientID  = "https://agent.example/agent.json"
	testTokenURL  = "https://auth.example.com/oauth/token"
	testWhoamiURL = "https://api.example.com/poppy/whoami"
	testMCPURL    = "https://mcp.example.com/mcp"
)

// clock is a settable time source shared by a Server and an agent.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1790900000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// rawAgent signs assertions and proofs by hand.
type rawAgent struct {
	t       *testing.T
	s       *poppytest.Server
	now     func() time.Time
	signKey *ecdsa.PrivateKey // published in jwks.json with kid "k1"
	dpopKey *ecdsa.PrivateKey
	userID  string
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newAgent publishes a fresh agent's documents on s.
func newAgent(t *testing.T, s *poppytest.Server, now func() time.Time) *rawAgent {
	t.Helper()
	a := &rawAgent{t: t, s: s, now: now, signKey: newKey(t), dpopKey: newKey(t), userID: "usr_Q7c1vK"}
	a.publish(nil, &a.signKey.PublicKey)
	return a
}

// publish serves agent.json (edited by mut) and a key set holding key.
func (a *rawAgent) publish(mut func(map[string]any), key any) {
	doc := map[string]any{
		"client_id":                  testClientID,
		"client_name":                "Raw Agent",
		"jwks_uri":                   "https://agent.example/jwks.json",
		"redirect_uris":              []string{"https://agent.example/oauth/callback"},
		"token_endpoint_auth_method": "private_key_jwt",
	}
	if mut != nil {
		mut(doc)
	}
	agentJSON, _ := json.Marshal(doc)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		a.t.Fatal(err)
	}
	a.s.SetAgentDocuments(agentJSON, jwks)
}

// sign makes a compact JWS of claims with key and the given header fields.
func (a *rawAgent) sign(key *ecdsa.PrivateKey, header map[jose.HeaderKey]any, embedJWK bool, claims map[string]any) string {
	a.t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		&jose.SignerOptions{ExtraHeaders: header, EmbedJWK: embedJWK})
	if err != nil {
		a.t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		a.t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

func jti() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// clientAssertion is a private_key_jwt assertion, edited by mut.
func (a *rawAgent) clientAssertion(mut func(map[string]any)) string {
	now := a.now().Unix()
	c := map[string]any{"iss": testClientID, "sub": testClientID, "aud": testTokenURL,
		"iat": now, "exp": now + 60, "jti": jti()}
	if mut != nil {
		mut(c)
	}
	return a.sign(a.signKey, map[jose.HeaderKey]any{"kid": "k1", "typ": "JWT"}, false, c)
}

// sessionAssertion is a §4.2 Session assertion, edited by mut.
func (a *rawAgent) sessionAssertion(typ string, mut func(map[string]any)) string {
	now := a.now().Unix()
	c := map[string]any{"iss": testClientID, "sub": a.userID, "aud": testTokenURL,
		"iat": now, "exp": now + 60, "jti": jti()}
	if mut != nil {
		mut(c)
	}
	return a.sign(a.signKey, map[jose.HeaderKey]any{"kid": "k1", "typ": typ}, false, c)
}

// proof is a DPoP proof with a.dpopKey, edited by mut.
func (a *rawAgent) proof(method, u, token, nonce string, mut func(map[string]any)) string {
	return a.proofWith(a.dpopKey, method, u, token, nonce, mut)
}

// noNonce asks proof for a proof without a nonce; "" gives the nonce the
// Server wants now, as a client that read its last DPoP-Nonce would.
const noNonce = "-"

func (a *rawAgent) proofWith(key *ecdsa.PrivateKey, method, u, token, nonce string, mut func(map[string]any)) string {
	c := map[string]any{"jti": jti(), "htm": method, "htu": u, "iat": a.now().Unix()}
	switch nonce {
	case noNonce:
		nonce = ""
	case "":
		if pu, err := url.Parse(u); err == nil {
			nonce = a.s.Nonce(pu.Host)
		}
	}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		c["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		c["nonce"] = nonce
	}
	if mut != nil {
		mut(c)
	}
	return a.sign(key, map[jose.HeaderKey]any{"typ": "dpop+jwt"}, true, c)
}

// grantForm is a JWT bearer token request body, with extra set over it.
func (a *rawAgent) grantForm(extra url.Values) url.Values {
	f := url.Values{
		"grant_type":            {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":             {a.sessionAssertion("JWT", nil)},
		"client_id":             {testClientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {a.clientAssertion(nil)},
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   map[string]any
}

func (r response) str(k string) string { s, _ := r.body[k].(string); return s }

// do sends a request through the Server's client and decodes a JSON answer.
func (a *rawAgent) do(req *http.Request) response {
	a.t.Helper()
	resp, err := a.s.Client().Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header}
	_ = json.Unmarshal(b, &r.body)
	return r
}

// postToken posts form to the token endpoint with proof ("" for none).
func (a *rawAgent) postToken(form url.Values, proof string) response {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, testTokenURL, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	return a.do(req)
}

// startSession starts a Session and returns the token response.
func (a *rawAgent) startSession() response {
	a.t.Helper()
	r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil))
	if r.status != 200 {
		a.t.Fatalf("starting a Session: %d %v", r.status, r.body)
	}
	return r
}

// call sends method u with the token in scheme and proof ("" for none).
func (a *rawAgent) call(method, u, scheme, token, proof string) response {
	a.t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	if token != "" {
		req.Header.Set("Authorization", scheme+" "+token)
	}
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	return a.do(req)
}

// whoami GETs the whoami endpoint with a DPoP token and a fresh proof.
func (a *rawAgent) whoami(token, nonce string) response {
	a.t.Helper()
	return a.call("GET", testWhoamiURL, "DPoP", token, a.proof("GET", testWhoamiURL, token, nonce, nil))
}
