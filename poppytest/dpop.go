package poppytest

// This file checks DPoP proofs (RFC 9449 §4.3, Poppy 0.1 §4.3) on token
// requests and resource requests, and keeps the server nonces (RFC 9449 §8,
// §9), which every proof must carry unless Options.NoNonce is set.

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// dpopProofs is the Server's concern of DPoP proofs (Poppy 0.1 §4.3, RFC
// 9449) and the nonce of each host. Its fields are guarded by the Server's
// mu.
type dpopProofs struct {
	*Server
	nonces map[string]string // host -> current DPoP nonce
}

// proofWindow is how far a proof's iat may be from now (Poppy 0.1 §4.3:
// "within the Company's acceptance window, such as one minute").
const proofWindow = time.Minute

// dpopAlgs are the proof algorithms accepted, as the metadata advertises in
// dpop_signing_alg_values_supported.
var dpopAlgs = []jose.SignatureAlgorithm{jose.ES256}

// proofClaims are the claims of a DPoP proof (RFC 9449 §4.2).
type proofClaims struct {
	Jti   string   `json:"jti"`
	Htm   string   `json:"htm"`
	Htu   string   `json:"htu"`
	Iat   *float64 `json:"iat"`
	Ath   *string  `json:"ath"`
	Nonce string   `json:"nonce"`
}

// checkProof checks the request's DPoP proof and returns the RFC 7638
// thumbprint of its key. token is the access token sent with it, or "" at
// the token endpoint, where the proof must have no ath.
func (s *dpopProofs) checkProof(r *http.Request, host, token string) (string, *oauthError) {
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 {
		// RFC 9449 §4.3: "There is not more than one DPoP HTTP request header field."
		return "", s.agentBug(r, "4.3", "invalid_dpop_proof", "%d DPoP headers, want exactly one", len(proofs))
	}
	key, claims, e := s.parseProof(r, proofs[0])
	if e != nil {
		return "", e
	}
	if e := s.checkProofClaims(r, host, token, claims); e != nil {
		return "", e
	}
	if !s.opts.NoNonce && claims.Nonce != s.nonce(host) && !(s.flaws().AnyNonce && claims.Nonce != "") {
		// RFC 9449 §8: the server answers use_dpop_nonce with the nonce in DPoP-Nonce
		return "", newError("use_dpop_nonce", "poppytest: proof must carry the current DPoP-Nonce")
	}
	thumb, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", s.agentBug(r, "4.3", "invalid_dpop_proof", "proof key has no thumbprint: %v", err)
	}
	jkt := base64.RawURLEncoding.EncodeToString(thumb)
	if s.useJTI("dpop "+jkt, claims.Jti, unixTime(*claims.Iat).Add(2*proofWindow)) {
		// Poppy 0.1 §4.3: the Company checks that "It hasn't accepted the same jti within that window."
		return "", s.agentBug(r, "4.3", "invalid_dpop_proof", "proof jti %q was used before", claims.Jti)
	}
	return jkt, nil
}

// parseProof verifies a proof's header and signature (RFC 9449 §4.3 checks
// 2 to 7) and returns its key and claims.
func (s *dpopProofs) parseProof(r *http.Request, raw string) (*jose.JSONWebKey, *proofClaims, *oauthError) {
	if hasPrivateJWK(raw) {
		// RFC 9449 §4.2: jwk "MUST NOT contain a private key"
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "the proof's jwk header holds a private key")
	}
	jws, err := jose.ParseSignedCompact(raw, dpopAlgs)
	if err != nil {
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "proof is not a compact JWS signed with %v: %v", dpopAlgs, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "proof has %d signatures", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	if typ := headerType(h); typ != "dpop+jwt" {
		// RFC 9449 §4.2: typ "MUST be dpop+jwt"
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "proof typ %q, want dpop+jwt", typ)
	}
	if h.JSONWebKey == nil {
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "proof has no jwk header")
	}
	payload, err := jws.Verify(h.JSONWebKey.Key)
	if err != nil {
		// Poppy 0.1 §4.3: "The proof's signature verifies with the key in its header."
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "proof signature: %v", err)
	}
	var c proofClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "proof claims: %v", err)
	}
	return h.JSONWebKey, &c, nil
}

// hasPrivateJWK reports whether a JWS's protected header has a jwk with a
// private member. Anything unparsable is left to the JWS parser.
func hasPrivateJWK(raw string) bool {
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h struct {
		JWK map[string]any `json:"jwk"`
	}
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	for _, m := range privateJWKMembers {
		if _, ok := h.JWK[m]; ok {
			return true
		}
	}
	return false
}

// checkProofClaims checks jti, htm, htu, iat and ath (RFC 9449 §4.3 checks
// 8 to 11, Poppy 0.1 §4.3).
func (s *dpopProofs) checkProofClaims(r *http.Request, host, token string, c *proofClaims) *oauthError {
	if c.Jti == "" || c.Iat == nil {
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof lacks jti or iat")
	}
	f := s.flaws()
	if c.Htm != r.Method && !f.IgnoreHTM {
		// Poppy 0.1 §4.3: "htm and htu match the request."
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof htm %q, request method %s", c.Htm, r.Method)
	}
	want := "https://" + r.Host + r.URL.EscapedPath()
	got, ok := normalizeHTU(c.Htu)
	if !ok {
		// Poppy 0.1 §4.3: htm and htu are "the request's HTTP method and URL, without the query or fragment"
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof htu %q is not an absolute URL without query or fragment", c.Htu)
	}
	if wantN, _ := normalizeHTU(want); got != wantN && !f.IgnoreHTU {
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof htu %q does not match the request URL %s", c.Htu, want)
	}
	if d := s.timeNow().Sub(unixTime(*c.Iat)); d > proofWindow || d < -proofWindow {
		// Poppy 0.1 §4.3: "iat is within the Company's acceptance window, such as one minute."
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof iat is %s from now, outside ±%s", d.Round(time.Second), proofWindow)
	}
	switch {
	case token == "" && c.Ath != nil:
		// Poppy 0.1 §4.3: "Proofs sent to the token endpoint don't have one."
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof to the token endpoint has ath")
	case token != "" && (c.Ath == nil || *c.Ath != tokenHash(token)):
		// Poppy 0.1 §4.3: "ath matches the Session Token."
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof ath does not match the access token")
	}
	return nil
}

// tokenHash is base64url(SHA-256(token)), the ath of RFC 9449 §4.2.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// normalizeHTU normalizes an https URL for comparison (RFC 9449 §4.3, by
// RFC 3986 §6.2.2 and §6.2.3): lowercase scheme and host, no default port,
// "/" for an empty path. It fails on a relative URL, a query or a fragment.
func normalizeHTU(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", false
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // an IPv6 literal keeps its brackets (RFC 3986 §3.2.2)
	}
	if p := u.Port(); p != "" && !(scheme == "https" && p == "443") && !(scheme == "http" && p == "80") {
		host += ":" + p
	}
	path := (&url.URL{Path: u.Path}).EscapedPath() // one percent-encoding for each path (RFC 3986 §6.2.2.2)
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, true
}

// nonce is the current DPoP nonce of host, made on first use.
func (s *dpopProofs) nonce(host string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nonces[host]
	if !ok {
		n = randomString(16)
		s.nonces[host] = n
	}
	return n
}

// Nonce returns the DPoP nonce proofs to host must carry now, as any
// response of that host tells a client in DPoP-Nonce; "" with
// Options.NoNonce. It is for tests whose own hand-made agent signs proofs.
func (s *dpopProofs) Nonce(host string) string {
	if s.opts.NoNonce {
		return ""
	}
	return s.nonce(hostOnly(host))
}

// RotateNonce replaces the DPoP nonce of every host, so proofs carrying an
// old one get use_dpop_nonce. It changes nothing with Options.NoNonce.
func (s *dpopProofs) RotateNonce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.nonces)
}

// randomString is n random bytes in base64url.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}
