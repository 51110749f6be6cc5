package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// rfc9449Key is the public key of RFC 9449 §4.1 Figure 3 (and Poppy 0.1 §4.3).
func rfc9449Key(t *testing.T) *ecdsa.PublicKey {
	t.Helper()
	dec := func(s string) *big.Int {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return new(big.Int).SetBytes(b)
	}
	return &ecdsa.PublicKey{
		Curve: elliptic.P256(),
		X:     dec("l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs"),
		Y:     dec("9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"),
	}
}

func TestThumbprintKnownAnswer(t *testing.T) {
	// RFC 9449 §6.1 gives this key's jkt.
	got, err := newKey(&ecdsa.PrivateKey{PublicKey: *rfc9449Key(t)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"; got.Thumbprint() != want {
		t.Errorf("thumbprint = %s, want %s", got.Thumbprint(), want)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	k := mustKey(t)
	b, err := k.MarshalPrivate()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if k2.KeyID() != k.KeyID() || !k2.priv.Equal(k.priv) {
		t.Error("key changed across MarshalPrivate/ParseKey")
	}
	pub, _ := json.Marshal(k.Public())
	if _, err := ParseKey(pub); err == nil {
		t.Error("ParseKey accepted a public key")
	}
	if _, err := ParseKey([]byte(`{"kty":"oct","k":"AAAA"}`)); err == nil {
		t.Error("ParseKey accepted a symmetric key")
	}
}

func mustKey(t testing.TB) *Key {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRedaction prints secrets and keys every way a program might and
// checks the secret material never shows.
func TestRedaction(t *testing.T) {
	s := NewSecret("s3cr3t-token-value")
	k := mustKey(t)
	priv, _ := k.MarshalPrivate()
	var d struct {
		D string `json:"d"`
	}
	if err := json.Unmarshal(priv, &d); err != nil || d.D == "" {
		t.Fatalf("private JWK has no d: %v", err)
	}
	holder := struct {
		Tok Secret
		Key *Key
	}{s, k}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, k), fmt.Sprintf(verb, holder))
	}
	j, _ := json.Marshal(holder)
	outs = append(outs, string(j), s.String(), k.String())
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("x", "tok", s, "key", k, "holder", holder)
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("x", "tok", s, "key", k)
	outs = append(outs, logBuf.String())
	all := strings.Join(outs, "\n")
	for _, leak := range []string{"s3cr3t", d.D, fmt.Sprintf("%x", k.priv.D.Bytes())} {
		if strings.Contains(all, leak) {
			t.Errorf("secret %q leaked in:\n%s", leak, all)
		}
	}
	if s.Reveal() != "s3cr3t-token-value" {
		t.Error("Reveal lost the value")
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1790900000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// verifyJWS checks a compact JWS with the public key and returns its
// protected header and claims.
func verifyJWS(t *testing.T, jws string, pub *ecdsa.PublicKey) (jose.Header, map[string]any) {
	t.Helper()
	obj, err := jose.ParseSigned(jws, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatalf("parse JWS: %v", err)
	}
	payload, err := obj.Verify(pub)
	if err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return obj.Signatures[0].Protected, claims
}
