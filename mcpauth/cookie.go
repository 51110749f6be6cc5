package mcpauth

// This file seals what Login keeps in a browser's cookies: small JSON
// values, encrypted and authenticated with AES-256-GCM under a key derived
// from the Resource's secret, the cookie's name bound in as additional
// data so that a value cannot be moved to another cookie. Replicas that
// share the secret read each other's cookies.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"
)

// maxCookieValue bounds a cookie value opened.
const maxCookieValue = 4 << 10

// sealer seals and opens cookie values. It is safe for concurrent use.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the key for purpose from secret (RFC 5869 HKDF).
func newSealer(secret []byte, purpose string) (sealer, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, "poppy-mcp mcpauth "+purpose, 32)
	if err != nil {
		return sealer{}, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealer{}, err
	}
	aead, err := cipher.NewGCM(block)
	return sealer{aead}, err
}

// seal encrypts v for the cookie name.
func (s sealer) seal(name string, v any) string {
	plain, _ := json.Marshal(v)
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name)))
}

// open decrypts the cookie name's value into v, reporting whether it was
// sealed by this key for this name.
func (s sealer) open(name, value string, v any) bool {
	if len(value) > maxCookieValue {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < s.aead.NonceSize() {
		return false
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(name))
	return err == nil && json.Unmarshal(plain, v) == nil
}

// setCookie sets a cookie only this origin gets: the __Host- prefix makes
// browsers keep it only when it is Secure, has Path=/ and no Domain.
// SameSite=Lax, not Strict: the browser arrives from another site (the
// assistant's link, the authorization server's redirect) by a top-level
// navigation, which Strict would send without it.
func setCookie(w http.ResponseWriter, name, value string, life time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", Secure: true, HttpOnly: true,
		MaxAge: int(life / time.Second), SameSite: http.SameSiteLaxMode})
}

// clearCookie tells the browser to drop the cookie name.
func clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1, SameSite: http.SameSiteLaxMode})
}
