package mcpauth

// Fuzz tests of every parser of what reaches poppy-mcp from outside: the
// tokens clients send, and the authorization server's metadata and key set.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	fuzzIssuer   = "https://idp.test"
	fuzzResource = "https://agent.test/mcp"
)

// fuzzResourceWithKey is a Resource holding one ES256 key, as if fetched, and
// a token that key signed for it.
func fuzzResourceWithKey(t testing.TB) (*Resource, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	r, err := New(fuzzIssuer, fuzzResource, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}
	r.keys.meta = &issuerMetadata{Issuer: fuzzIssuer, JWKSURI: fuzzIssuer + "/keys"}
	r.keys.keys, r.keys.fetched, r.keys.tried = []jose.JSONWebKey{pub}, time.Now(), time.Now()
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	tok, err := jwt.Signed(signer).Claims(map[string]any{"iss": fuzzIssuer, "sub": "alice", "aud": fuzzResource,
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "a b"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return r, tok
}

// FuzzVerify: no token makes Verify panic, and the only tokens it accepts
// say what the key signed (a fuzzer cannot forge the signature), for this
// issuer and resource.
func FuzzVerify(f *testing.F) {
	r, good := fuzzResourceWithKey(f)
	parts := strings.Split(good, ".")
	f.Add(good)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(`eyJhbGciOiJub25lIn0.` + parts[1] + ".")
	f.Add(`eyJhbGciOiJIUzI1NiIsImtpZCI6ImsxIn0.` + parts[1] + "." + parts[2])
	f.Add("a.b.c")
	f.Add("....")
	f.Add(`eyJhbGciOiJFUzI1NiIsImNyaXQiOlsieCJdfQ.` + parts[1] + "." + parts[2])
	f.Fuzz(func(t *testing.T, raw string) {
		tok, err := r.Verify(context.Background(), raw)
		if err != nil {
			var e *Error
			if !asError(err, &e) || strings.Contains(e.Description, raw) && len(raw) > 40 {
				t.Fatalf("Verify(%q): %v is not a clean *Error", raw, err)
			}
			return
		}
		if tok.User != (User{Issuer: fuzzIssuer, Subject: "alice"}) || !slices.Equal(tok.Scopes, []string{"a", "b"}) {
			t.Fatalf("Verify(%q) accepted %+v", raw, tok)
		}
	})
}

// FuzzIssuerMetadata: metadata either parses with the issuer asked for and
// an https jwks_uri, or is refused; never a panic.
func FuzzIssuerMetadata(f *testing.F) {
	f.Add([]byte(`{"issuer":"https://idp.test","jwks_uri":"https://idp.test/keys","authorization_endpoint":"https://idp.test/authorize"}`))
	f.Add([]byte(`{"issuer":"https://idp.test/","jwks_uri":"https://idp.test/keys"}`))
	f.Add([]byte(`{"issuer":"https://idp.test","jwks_uri":"http://idp.test/keys"}`))
	f.Add([]byte(`{"issuer":"https://idp.test","jwks_uri":"https://idp.test/keys","token_endpoint":"javascript:x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseIssuerMetadata(body, fuzzIssuer)
		if err == nil && (m.Issuer != fuzzIssuer || !isHTTPS(m.JWKSURI)) {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzKeySet: a key set yields only public, asymmetric signature keys,
// never a panic.
func FuzzKeySet(f *testing.F) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 1024)
	for _, k := range []jose.JSONWebKey{{Key: &ec.PublicKey, KeyID: "ec"}, {Key: ec, KeyID: "private"}, {Key: &rs.PublicKey, KeyID: "short"},
		{Key: []byte("a shared secret"), KeyID: "oct"}, {Key: &ec.PublicKey, KeyID: "enc", Use: "enc"}} {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k}})
		f.Add(b)
	}
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""},{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, err := parseKeySet(body)
		for _, k := range keys {
			if err != nil || !k.IsPublic() || !k.Valid() || (k.Use != "" && k.Use != "sig") {
				t.Fatalf("kept %+v", k)
			}
			if _, ok := k.Key.([]byte); ok {
				t.Fatal("kept a symmetric key")
			}
		}
	})
}

// FuzzCookie: a browser's cookie value opens only when this key sealed it
// for this cookie's name; anything else is no one's, never a panic.
func FuzzCookie(f *testing.F) {
	s, _ := newSealer([]byte(strings.Repeat("k", 32)), "fuzz")
	good := s.seal(SessionCookie, personState{Issuer: fuzzIssuer, Subject: "alice", Expires: 1})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add("")
	f.Add(strings.Repeat("A", 40))
	f.Fuzz(func(t *testing.T, value string) {
		var p personState
		if s.open(SessionCookie, value, &p) && value != good && p != (personState{Issuer: fuzzIssuer, Subject: "alice", Expires: 1}) {
			t.Fatalf("opened a forged cookie %q: %+v", value, p)
		}
		if s.open(loginCookiePrefix+"x", value, &p) {
			t.Fatalf("a session cookie opened as a login cookie: %q", value)
		}
	})
}
