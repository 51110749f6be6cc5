package auth

import (
	"crypto"
	"encoding/base64"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func base64Raw(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func TestATHKnownAnswer(t *testing.T) {
	// RFC 9449 §7.1 example access token and its ath (§4.3 Figure 3 example).
	got := ATH(NewSecret("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"))
	if want := "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"; got != want {
		t.Errorf("ath = %s, want %s", got, want)
	}
}

func TestHTU(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/orders/ord_7Hk2/exchanges?x=1#frag": "https://api.example.com/orders/ord_7Hk2/exchanges",
		"HTTPS://API.Example.com/a%2Fb?q":                            "https://api.example.com/a%2Fb",
		"https://example.com":                                        "https://example.com/",
		"https://example.com:8443/p":                                 "https://example.com:8443/p",
	} {
		got, err := HTU(in)
		if err != nil || got != want {
			t.Errorf("HTU(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := HTU("/relative"); err == nil {
		t.Error("HTU accepted a relative URL")
	}
}

func TestProof(t *testing.T) {
	clock := newClock()
	pk := NewProofKey(mustKey(t))
	pk.now = clock.Now
	tok := NewSecret("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
	const u = "https://api.example.com/orders/ord_7Hk2/exchanges?secret=no#frag"

	p, err := pk.Proof("POST", u, tok, "n-0S6_WzA2Mj")
	if err != nil {
		t.Fatal(err)
	}
	hdr, c := verifyJWS(t, p, pk.Key().PublicKey())
	if hdr.ExtraHeaders["typ"] != "dpop+jwt" || hdr.Algorithm != "ES256" || hdr.KeyID != "" {
		t.Errorf("header = %+v", hdr)
	}
	// RFC 9449 §4.2: jwk is the public key; the proof verifies with it.
	if hdr.JSONWebKey == nil || !hdr.JSONWebKey.IsPublic() {
		t.Fatal("no public jwk in header")
	}
	if tp := thumb(t, hdr.JSONWebKey); tp != pk.Thumbprint() {
		t.Errorf("jwk thumbprint = %s, want %s", tp, pk.Thumbprint())
	}
	if _, err := jose.ParseSigned(p, []jose.SignatureAlgorithm{jose.ES256}); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"htm": "POST", "htu": "https://api.example.com/orders/ord_7Hk2/exchanges",
		"iat": float64(1790900000), "ath": "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo", "nonce": "n-0S6_WzA2Mj",
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s = %v, want %v", k, c[k], v)
		}
	}
	// A token request's proof has neither ath nor (without a nonce) nonce.
	p2, _ := pk.Proof("POST", "https://auth.example.com/oauth/token", Secret{}, "")
	_, c2 := verifyJWS(t, p2, pk.Key().PublicKey())
	if _, ok := c2["ath"]; ok {
		t.Error("token request proof has ath")
	}
	if _, ok := c2["nonce"]; ok {
		t.Error("proof has an empty nonce")
	}
	if c2["jti"] == c["jti"] {
		t.Error("jti reused")
	}
}

func thumb(t *testing.T, k *jose.JSONWebKey) string {
	t.Helper()
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

func TestNonces(t *testing.T) {
	var n nonces
	n.set("https://a", "one")
	n.set("https://a", "")          // an empty header keeps the old one
	n.set("https://a", "bad nonce") // not NQCHAR: ignored
	n.set("https://b", "two")
	if n.get("https://a") != "one" || n.get("https://b") != "two" || n.get("https://c") != "" {
		t.Errorf("nonces = %v", n.m)
	}
	n.set("https://a", "three") // RFC 9449 §8.2: the newest replaces
	if n.get("https://a") != "three" {
		t.Error("nonce not replaced")
	}
}

func BenchmarkProof(b *testing.B) {
	pk := NewProofKey(mustKey(b))
	tok := NewSecret("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pk.Proof("GET", "https://api.example.com/poppy/whoami?x=1", tok, "nonce-1"); err != nil {
			b.Fatal(err)
		}
	}
}
