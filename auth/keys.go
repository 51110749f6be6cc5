// This file implements the agent's ES256 keys: generation, the public JWK
// (RFC 7517), the RFC 7638 thumbprint, (de)serialisation for the store, and
// compact JWS signing (RFC 7515 §7.1) used by assertions and DPoP proofs.

package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	jose "github.com/go-jose/go-jose/v4"
)

const redacted = "[redacted]"

// Secret holds a credential: a Session Token, an Account Token, an assertion,
// a device code. Its String, Format, MarshalJSON, MarshalText and LogValue all
// print "[redacted]", so it cannot leak through fmt, encoding/json or slog.
// Call Reveal only where the value goes on the wire. The zero value is empty.
// A Secret is immutable and safe for concurrent use.
type Secret struct{ v string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{v: s} }

// Reveal returns the secret value itself. Use it only to put it on the wire.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

// String returns "[redacted]".
func (s Secret) String() string { return redacted }

// GoString returns "[redacted]".
func (s Secret) GoString() string { return redacted }

// Format prints "[redacted]" for every verb.
func (s Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// MarshalJSON returns "[redacted]" as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText returns "[redacted]".
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue returns "[redacted]" for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Key is an ES256 (ECDSA P-256) private key with its key ID, the RFC 7638
// thumbprint of its public key. Its String, Format and MarshalJSON redact the
// private part. A Key is immutable and safe for concurrent use.
type Key struct {
	priv *ecdsa.PrivateKey
	pub  jose.JSONWebKey // public JWK with KeyID set
	kid  string
	// jwkJSON is the public JWK without kid, for DPoP proof headers.
	jwkJSON json.RawMessage
}

// GenerateKey makes a new ES256 key.
func GenerateKey() (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: generate key: %w", err)
	}
	return newKey(priv)
}

func newKey(priv *ecdsa.PrivateKey) (*Key, error) {
	if priv.Curve != elliptic.P256() {
		return nil, errors.New("auth: key is not on P-256")
	}
	pub := jose.JSONWebKey{Key: &priv.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}
	tp, err := pub.Thumbprint(crypto.SHA256) // RFC 7638 §3
	if err != nil {
		return nil, fmt.Errorf("auth: thumbprint: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	pub.KeyID = kid
	// RFC 9449 §4.2: the jwk header carries the public key only.
	bare := jose.JSONWebKey{Key: &priv.PublicKey}
	jwkJSON, err := bare.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("auth: public key: %w", err)
	}
	return &Key{priv: priv, pub: pub, kid: kid, jwkJSON: jwkJSON}, nil
}

// ParseKey reads a key written by MarshalPrivate: a private JWK (RFC 7517).
func ParseKey(data []byte) (*Key, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("auth: parse key: %w", err)
	}
	priv, ok := jwk.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("auth: parse key: not an ECDSA private key")
	}
	return newKey(priv)
}

// MarshalPrivate returns the private key as a JWK, for the store only. The
// result is a secret: keep it out of logs and errors.
func (k *Key) MarshalPrivate() ([]byte, error) {
	jwk := jose.JSONWebKey{Key: k.priv, KeyID: k.kid, Algorithm: string(jose.ES256), Use: "sig"}
	b, err := jwk.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("auth: marshal key: %w", err)
	}
	return b, nil
}

// KeyID returns the key's ID: the base64url RFC 7638 SHA-256 thumbprint.
func (k *Key) KeyID() string { return k.kid }

// Thumbprint returns the RFC 7638 SHA-256 thumbprint, base64url-encoded
// (the value a Company binds a DPoP token to, RFC 9449 §6.1 "jkt").
func (k *Key) Thumbprint() string { return k.kid }

// Public returns the public JWK, with kid, use "sig" and alg ES256.
func (k *Key) Public() jose.JSONWebKey { return k.pub }

// PublicKey returns the ECDSA public key.
func (k *Key) PublicKey() *ecdsa.PublicKey { return &k.priv.PublicKey }

// String returns the key ID only.
func (k *Key) String() string { return "auth.Key(" + k.kid + ")" }

// Format prints the key ID only, for every verb.
func (k *Key) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// MarshalJSON returns the public JWK only; use MarshalPrivate for the store.
func (k *Key) MarshalJSON() ([]byte, error) { return k.pub.MarshalJSON() }

// LogValue returns the key ID only.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// header is a JOSE header for ES256, built once per key and type.
type header struct {
	Alg string          `json:"alg"`
	Typ string          `json:"typ"`
	Kid string          `json:"kid,omitempty"`
	JWK json.RawMessage `json:"jwk,omitempty"`
}

// encodeHeader returns the base64url protected header for ES256 with typ and
// either the kid or the embedded public JWK.
func (k *Key) encodeHeader(typ string, embedJWK bool) string {
	h := header{Alg: string(jose.ES256), Typ: typ}
	if embedJWK {
		h.JWK = k.jwkJSON
	} else {
		h.Kid = k.kid
	}
	b, err := json.Marshal(h)
	if err != nil { // cannot happen: strings and a valid RawMessage
		panic("auth: header: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// sign returns the JWS Compact Serialization (RFC 7515 §7.1) of claims under
// the encoded protected header, with an ES256 signature (RFC 7518 §3.4: R and
// S as 32-byte big-endian integers, concatenated).
func (k *Key) sign(encodedHeader string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	enc := base64.RawURLEncoding
	n := len(encodedHeader) + 1 + enc.EncodedLen(len(payload))
	buf := make([]byte, 0, n+1+enc.EncodedLen(64))
	buf = append(buf, encodedHeader...)
	buf = append(buf, '.')
	buf = enc.AppendEncode(buf, payload)
	digest := sha256.Sum256(buf)
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, digest[:])
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	var sig [64]byte
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	buf = append(buf, '.')
	buf = enc.AppendEncode(buf, sig[:])
	return string(buf), nil
}

// randomID returns base64url of 16 random bytes (128 bits), for jti values.
// Poppy 0.1 §4.2: "jti is a unique ID for the assertion, with at least 128 random bits."
func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: crypto/rand: " + err.Error()) // crypto/rand.Read never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
