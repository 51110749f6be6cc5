// This file implements DPoP proofs (RFC 9449 §4) and the per-origin nonce
// memory (RFC 9449 §8 and §9) used by every request the agent makes.

package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// TypeDPoP is the typ of a DPoP proof.
// RFC 9449 §4.2: "typ: A field with the value dpop+jwt"
const TypeDPoP = "dpop+jwt"

// ProofKey signs DPoP proofs with one ES256 key. Poppy 0.1 §4.3: the DPoP
// key is separate from the signing keys in jwks.json. It is safe for
// concurrent use.
type ProofKey struct {
	key    *Key
	header string // encoded protected header: typ, alg, jwk
	now    func() time.Time
}

// NewProofKey wraps k for DPoP proofs.
func NewProofKey(k *Key) *ProofKey {
	// RFC 9449 §4.2: typ dpop+jwt, alg, and jwk "the public key chosen by the client".
	return &ProofKey{key: k, header: k.encodeHeader(TypeDPoP, true), now: timeNow}
}

// Key returns the underlying key.
func (p *ProofKey) Key() *Key { return p.key }

// Thumbprint returns the RFC 7638 thumbprint of the proof key, the value a
// Company binds tokens to (RFC 9449 §6.1 "jkt").
func (p *ProofKey) Thumbprint() string { return p.key.Thumbprint() }

// proofWire is the DPoP proof's claims as they cross the wire.
type proofWire struct {
	Jti   string `json:"jti"`
	Htm   string `json:"htm"`
	Htu   string `json:"htu"`
	Iat   int64  `json:"iat"`
	Ath   string `json:"ath,omitempty"`
	Nonce string `json:"nonce,omitempty"`
}

// Proof signs a DPoP proof for one request. accessToken is the token sent
// with the request (zero for token requests, which then carry no ath), and
// nonce the origin's latest DPoP-Nonce ("" when none is known).
func (p *ProofKey) Proof(method, rawURL string, accessToken Secret, nonce string) (string, error) {
	htu, err := HTU(rawURL)
	if err != nil {
		return "", err
	}
	if method == "" {
		return "", errors.New("auth: proof needs a method")
	}
	w := proofWire{
		Jti: randomID(), // RFC 9449 §4.2: "jti: Unique identifier for the DPoP proof JWT"
		Htm: method,     // RFC 9449 §4.2: "htm: The value of the HTTP method (Section 9.1 of [RFC9110])"
		Htu: htu,
		Iat: p.now().Unix(),
		// RFC 9449 §4.2: "nonce: A recent nonce provided via the DPoP-Nonce HTTP header."
		Nonce: nonce,
	}
	if !accessToken.IsZero() {
		// RFC 9449 §4.2: "ath: Hash of the access token. ... base64url-encoded SHA-256 hash of the ASCII encoding"
		w.Ath = ATH(accessToken)
	}
	jws, err := p.key.sign(p.header, w)
	if err != nil {
		return "", fmt.Errorf("auth: DPoP proof: %w", err)
	}
	return jws, nil
}

// ATH returns the ath claim for an access token: base64url(SHA-256(token)).
func ATH(accessToken Secret) string {
	sum := sha256.Sum256([]byte(accessToken.Reveal()))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// HTU returns the htu claim for a request URL.
// RFC 9449 §4.2: "htu: The HTTP target URI (Section 7.1 of [RFC9110]) of the
// request to which the JWT is attached, without query and fragment parts."
func HTU(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("auth: proof: %q is not an absolute URL", rawURL)
	}
	return htuOf(u), nil
}

func htuOf(u *url.URL) string {
	v := url.URL{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Host), Path: u.Path, RawPath: u.RawPath}
	if v.Path == "" {
		v.Path = "/"
	}
	return v.String()
}

// origin returns scheme://host[:port] of u, the key of per-origin state.
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// nonces remembers the latest DPoP-Nonce of each origin.
// RFC 9449 §8.2: "the client MUST use the new nonce value supplied for
// subsequent requests" — so this is one current value, not a pool.
// It is safe for concurrent use.
type nonces struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]string
}

func (n *nonces) get(origin string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[origin]
}

// set records the nonce from a response; an empty value leaves the old one.
func (n *nonces) set(origin, nonce string) {
	if nonce == "" || !validNonce(nonce) {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	n.m[origin] = nonce
}

// validNonce checks the DPoP-Nonce syntax.
// RFC 9449 §8.1: nonce = 1*NQCHAR, NQCHAR = %x21 / %x23-5B / %x5D-7E
func validNonce(s string) bool {
	if len(s) > 512 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
