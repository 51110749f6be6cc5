package mcpauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

func asError(err error, e **Error) bool { return errors.As(err, e) }

// TestMetadataURLs: the issuer's metadata is looked for where the MCP
// authorization specification has clients look: RFC 8414 first, then
// OpenID Connect Discovery, with the well-known path inserted before an
// issuer's path and, for OIDC, appended after it too.
func TestMetadataURLs(t *testing.T) {
	for issuer, want := range map[string][]string{
		"https://idp.test": {"https://idp.test/.well-known/oauth-authorization-server", "https://idp.test/.well-known/openid-configuration"},
		"https://idp.test/realms/people": {"https://idp.test/.well-known/oauth-authorization-server/realms/people",
			"https://idp.test/.well-known/openid-configuration/realms/people", "https://idp.test/realms/people/.well-known/openid-configuration"},
	} {
		if got := metadataURLs(issuer); !slices.Equal(got, want) {
			t.Errorf("%s: %v", issuer, got)
		}
	}
}

// TestParseIssuerMetadata: the metadata's issuer must be the one asked for,
// exactly (a trailing slash is another issuer), and its URLs https.
func TestParseIssuerMetadata(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"issuer":"https://idp.test","jwks_uri":"https://idp.test/keys"}`:                              true,
		`{"issuer":"https://idp.test/","jwks_uri":"https://idp.test/keys"}`:                             false,
		`{"issuer":"https://evil.test","jwks_uri":"https://idp.test/keys"}`:                             false,
		`{"issuer":"https://idp.test","jwks_uri":"http://idp.test/keys"}`:                               false,
		`{"issuer":"https://idp.test"}`:                                                                 false,
		`{"issuer":"https://idp.test","jwks_uri":"https://idp.test/k","token_endpoint":"http://idp.t"}`: false,
	} {
		if _, err := parseIssuerMetadata([]byte(body), "https://idp.test"); (err == nil) != ok {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestTokenType: a typ naming another kind of JWT is refused; the generic
// JWT, none and at+jwt are accepted, and with StrictType only at+jwt.
func TestTokenType(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, strict := range []bool{false, true} {
		r, _ := New(fuzzIssuer, fuzzResource, &Options{StrictType: strict})
		r.keys.meta = &issuerMetadata{Issuer: fuzzIssuer}
		r.keys.keys, r.keys.fetched, r.keys.tried = []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k"}}, time.Now(), time.Now()
		for typ, loose := range map[string]bool{"": true, "JWT": true, "at+jwt": true, "application/at+JWT": true, "dpop+jwt": false, "logout+jwt": false} {
			opts := &jose.SignerOptions{}
			if typ != "" {
				opts = opts.WithType(jose.ContentType(typ))
			}
			signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k"}}, opts)
			tok, _ := jwt.Signed(signer).Claims(map[string]any{"iss": fuzzIssuer, "sub": "s", "aud": fuzzResource, "exp": time.Now().Add(time.Hour).Unix()}).Serialize()
			want := loose && (!strict || strings.EqualFold(strings.TrimPrefix(typ, "application/"), "at+jwt"))
			if _, err := r.Verify(context.Background(), tok); (err == nil) != want {
				t.Errorf("strict %v, typ %q: %v", strict, typ, err)
			}
		}
	}
}

// TestAudience: aud must name this resource: a trailing slash is no
// difference, another path, host or scheme is.
func TestAudience(t *testing.T) {
	r, _ := fuzzResourceWithKey(t)
	for aud, ok := range map[string]bool{fuzzResource: true, fuzzResource + "/": true, "https://agent.test/": false,
		"https://agent.test/mcp/other": false, "https://AGENT.test/mcp": false, "http://agent.test/mcp": false} {
		c := &accessClaims{Claims: jwt.Claims{Issuer: fuzzIssuer, Subject: "s", Audience: jwt.Audience{"x", aud}, Expiry: jwt.NewNumericDate(time.Now().Add(time.Minute))}}
		if _, err := r.checkClaims(c); (err == nil) != ok {
			t.Errorf("aud %q: %v", aud, err)
		}
	}
}

// TestScopes: scope (RFC 9068), and scp as a string or a list.
func TestScopes(t *testing.T) {
	for _, c := range []accessClaims{{Scope: "a b"}, {Scp: []byte(`"a b"`)}, {Scp: []byte(`["a","b"]`)}} {
		if got := scopesOf(&c); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%+v: %v", c, got)
		}
	}
}
