package mcpauth

// This file checks an access token as RFC 9068 (JWT Profile for OAuth 2.0
// Access Tokens) §4 has a resource server do: a JWT signed by the issuer's
// published keys with an allowed algorithm, from that issuer, for this
// resource (RFC 8707), within its lifetime. Nothing reads the token after
// the check; it is never passed on.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// DefaultAlgorithms are the JWS algorithms accepted when
// Options.Algorithms is zero: the asymmetric ones of RFC 7518 §3.1 and
// EdDSA (RFC 8037). Never "none", never HMAC: a resource server that knows
// only public keys must not accept a MAC made with one (RFC 8725 §2.1).
var DefaultAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// maxTokenBytes caps the token parsed.
const maxTokenBytes = 16 << 10

// Token is what a checked access token says.
type Token struct {
	// User is the person the token speaks for: (iss, sub).
	User User
	// Scopes are the token's scopes (scope, or scp as some servers name it).
	Scopes []string
	// ClientID is the client the token was issued to (client_id, or azp).
	ClientID string
	// Expiry is when the token expires (exp).
	Expiry time.Time
}

// header is the part of the JOSE header read before the signature.
type header struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid"`
	Typ  string   `json:"typ"`
	Crit []string `json:"crit"`
}

// accessClaims are the claims of RFC 9068 §2.2 that are checked.
type accessClaims struct {
	jwt.Claims
	Scope    string          `json:"scope"`
	Scp      json.RawMessage `json:"scp"`
	ClientID string          `json:"client_id"`
	AZP      string          `json:"azp"`
}

// Verify checks an access token and says whose it is. Errors are *Error:
// ErrInvalidToken (with the reason in Description), or ErrUnavailable when
// the issuer's keys cannot be had.
func (r *Resource) Verify(ctx context.Context, raw string) (*Token, error) {
	h, err := readHeader(raw)
	if err != nil {
		return nil, err
	}
	if err := r.checkType(h); err != nil {
		return nil, err
	}
	var c accessClaims
	if err := r.signed(ctx, raw, h, &c); err != nil {
		return nil, err
	}
	return r.checkClaims(&c)
}

// signed checks what every JWT of the issuer must pass (an allowed
// algorithm, no critical extension, iss, a signature by one of the
// issuer's keys) and decodes its verified claims into dest.
func (r *Resource) signed(ctx context.Context, raw string, h *header, dest any) error {
	if !slices.Contains(r.algs, jose.SignatureAlgorithm(h.Alg)) {
		// RFC 8725 §3.1: "Libraries MUST enable the caller to specify a
		// supported set of algorithms and MUST NOT use any other algorithms".
		return invalidToken("the token's algorithm " + printable(h.Alg) + " is not allowed")
	}
	if len(h.Crit) > 0 {
		// RFC 7515 §4.1.11: critical extensions not understood make the JWS invalid.
		return invalidToken("the token names critical header extensions")
	}
	tok, err := jwt.ParseSigned(raw, r.algs) // the allowlist again, in the library that verifies
	if err != nil {
		return invalidToken("the token is not a signed JWT")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return invalidToken("the token's claims are not JSON")
	}
	// A token of another issuer is refused before any key is looked for,
	// so it cannot make poppy-mcp fetch anything.
	if unverified.Issuer != r.issuer {
		return invalidToken("the token was not issued by " + r.issuer)
	}
	keys, err := r.keys.lookup(ctx, h.Kid, jose.SignatureAlgorithm(h.Alg))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if tok.Claims(k.Key, dest) == nil {
			return nil
		}
	}
	return invalidToken("the token's signature does not verify")
}

// readHeader decodes the JOSE header of a compact JWS.
func readHeader(raw string) (*header, error) {
	if len(raw) > maxTokenBytes {
		return nil, invalidToken("the token is too large")
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		// RFC 9068: JWT access tokens. An opaque token would need
		// introspection, which poppy-mcp does not do.
		return nil, invalidToken("the token is not a JWT access token (RFC 9068)")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	var h header
	if err != nil || json.Unmarshal(b, &h) != nil {
		return nil, invalidToken("the token's header is not base64url JSON")
	}
	return &h, nil
}

// checkType refuses a token whose typ names another kind of JWT.
func (r *Resource) checkType(h *header) error {
	switch typ := strings.TrimPrefix(strings.ToLower(h.Typ), "application/"); {
	case typ == "at+jwt":
	case r.strictType:
		// RFC 9068 §4: "Resource servers MUST verify that the typ header
		// value is "at+jwt" or "application/at+jwt"".
		return invalidToken("the token's typ is not at+jwt")
	case typ != "" && typ != "jwt":
		// Most authorization servers still write the generic "JWT" (or
		// none), which is accepted; a typ naming another kind of JWT (a
		// DPoP proof, a logout token) is not an access token.
		return invalidToken("the token's typ " + printable(h.Typ) + " is not an access token's")
	}
	return nil
}

// checkClaims checks the verified claims: issuer, subject, audience and
// lifetime, and reads the scopes.
func (r *Resource) checkClaims(c *accessClaims) (*Token, error) {
	now := r.now()
	switch {
	case c.Issuer != r.issuer: // RFC 9068 §4: "MUST exactly match"
		return nil, invalidToken("the token was not issued by " + r.issuer)
	case c.Subject == "":
		return nil, invalidToken("the token has no sub")
	case !oauthex.MatchesResource(c.Audience, r.resource):
		// RFC 9068 §4: "MUST validate that the aud claim contains a resource
		// indicator value corresponding to an identifier the resource server
		// expects for itself"; RFC 8707 §2 resource indicators. A trailing
		// slash is not a difference (RFC 3986 §6.2.3), any other is.
		return nil, invalidToken("the token is not for this resource (" + r.resource + ")")
	case c.Expiry == nil:
		return nil, invalidToken("the token has no exp")
	case now.After(c.Expiry.Time().Add(r.leeway)):
		return nil, invalidToken("the token has expired")
	case c.NotBefore != nil && now.Add(r.leeway).Before(c.NotBefore.Time()):
		return nil, invalidToken("the token is not valid yet")
	case c.IssuedAt != nil && now.Add(r.leeway).Before(c.IssuedAt.Time()):
		return nil, invalidToken("the token was issued in the future")
	}
	client := c.ClientID
	if client == "" {
		client = c.AZP
	}
	return &Token{User: User{Issuer: c.Issuer, Subject: c.Subject}, Scopes: scopesOf(c), ClientID: client, Expiry: c.Expiry.Time()}, nil
}

// scopesOf reads scope (RFC 9068 §2.2.3, space-separated) or, as some
// servers write it, scp (a string or an array).
func scopesOf(c *accessClaims) []string {
	if c.Scope != "" {
		return strings.Fields(c.Scope)
	}
	var s string
	if json.Unmarshal(c.Scp, &s) == nil {
		return strings.Fields(s)
	}
	var list []string
	if json.Unmarshal(c.Scp, &list) == nil {
		return list
	}
	return nil
}

// printable quotes a header value for a description: at most 32
// characters, printable ASCII without quotes or backslashes.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
	if len(s) > 32 {
		s = s[:32]
	}
	return "'" + s + "'"
}
