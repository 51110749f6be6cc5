package poppytest

// This file checks the two JWTs an agent signs with its published keys: the
// client assertion that authenticates it at the token endpoint (Poppy 0.1
// §4.1, RFC 7523 §2.2 and §3) and the Session assertion of the JWT bearer
// grant (Poppy 0.1 §4.2, RFC 7523 §2.1 and §3).

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// clientAuth is the token endpoint's concern of client authentication
// (Poppy 0.1 §4.1, §4.2): the agent's client assertion and Session
// assertion, and the documents of its client_id. Its fields are guarded by
// the Server's mu.
type clientAuth struct {
	*Server
	clients map[string]*client   // client_id -> fetched documents (client.go)
	jtis    map[string]time.Time // kind+jti -> until when it is remembered
}

const (
	clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	grantJWTBearer      = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	browserAssertionTyp = "poppy-browser+jwt"

	// maxClientAssertionLife bounds exp-iat (or exp-now) of a client assertion.
	maxClientAssertionLife = 5 * time.Minute
	// maxSessionAssertionLife bounds exp-iat of a Session assertion. The spec's
	// example uses one minute; more than five is refused.
	maxSessionAssertionLife = 5 * time.Minute
	// clockLeeway is how far in the future an iat or nbf may be.
	clockLeeway = time.Minute
	// minJTILength is 128 bits in unpadded base64url (Poppy 0.1 §4.2).
	minJTILength = 22
)

// jwtClaims are the claims of an agent-signed assertion. Aud stays raw so a
// string and an array can be told apart.
type jwtClaims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Iat *float64        `json:"iat"`
	Exp *float64        `json:"exp"`
	Nbf *float64        `json:"nbf"`
	Jti string          `json:"jti"`
}

func unixTime(f float64) time.Time { return time.Unix(0, int64(f*1e9)) }

// audiences returns aud as a list and whether it was a single string.
func (c *jwtClaims) audiences() ([]string, bool) {
	var one string
	if json.Unmarshal(c.Aud, &one) == nil {
		return []string{one}, true
	}
	var many []string
	_ = json.Unmarshal(c.Aud, &many)
	return many, false
}

// timeProblem describes what is wrong with the assertion's times, or "".
// Every assertion needs exp; needIat also requires iat.
func (s *clientAuth) timeProblem(c *jwtClaims, maxLife time.Duration, needIat bool) string {
	now := s.timeNow()
	switch {
	case c.Exp == nil:
		return "no exp"
	case needIat && c.Iat == nil:
		return "no iat"
	case !unixTime(*c.Exp).After(now):
		return "expired " + now.Sub(unixTime(*c.Exp)).Round(time.Second).String() + " ago"
	case c.Iat != nil && unixTime(*c.Iat).After(now.Add(clockLeeway)):
		return "iat is in the future"
	case c.Nbf != nil && unixTime(*c.Nbf).After(now.Add(clockLeeway)):
		return "nbf is in the future"
	}
	start := now
	if c.Iat != nil {
		start = unixTime(*c.Iat)
	}
	if life := unixTime(*c.Exp).Sub(start); life > maxLife {
		return "lives " + life.Round(time.Second).String() + ", more than " + maxLife.String()
	}
	return ""
}

// useJTI records that an assertion or proof with this jti was accepted, and
// reports whether it was seen before. It remembers the jti until forget.
func (s *clientAuth) useJTI(kind, jti string, forget time.Time) (reused bool) {
	now := s.timeNow()
	key := kind + "\x00" + jti
	s.mu.Lock()
	defer s.mu.Unlock()
	if until, ok := s.jtis[key]; ok && now.Before(until) {
		return true
	}
	for k, until := range s.jtis {
		if !now.Before(until) {
			delete(s.jtis, k)
		}
	}
	s.jtis[key] = forget
	return false
}

// authenticateClient checks a request's client assertion (private_key_jwt,
// RFC 7523 §2.2) and returns the agent it authenticates. endpoint is the URL
// the request was sent to, accepted as aud beside the token endpoint and the
// issuer.
func (s *clientAuth) authenticateClient(r *http.Request, form url.Values, endpoint string) (*client, *oauthError) {
	if t := form.Get("client_assertion_type"); t != clientAssertionType {
		// Poppy 0.1 §4.1: the agent "authenticates at the token endpoint with a client assertion"
		return nil, s.agentBug(r, "4.1", "invalid_client", "client_assertion_type %q, want %s", t, clientAssertionType)
	}
	raw := form.Get("client_assertion")
	iss, e := s.assertionIssuer(r, form, raw)
	if e != nil {
		return nil, e
	}
	c, cached, e := s.loadClient(r, iss, false)
	if e != nil {
		return nil, e
	}
	_, payload, err := verifyJWT(raw, c.keys)
	if err != nil && cached {
		// The agent may have rotated its keys: fetch them again, once.
		if c, _, e = s.loadClient(r, iss, true); e != nil {
			return nil, e
		}
		_, payload, err = verifyJWT(raw, c.keys)
	}
	if err != nil {
		return nil, s.agentBug(r, "4.1", "invalid_client", "client assertion: %v", err)
	}
	var claims jwtClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, s.agentBug(r, "4.1", "invalid_client", "client assertion claims: %v", err)
	}
	if e := s.checkClientClaims(r, &claims, c.id, endpoint); e != nil {
		return nil, e
	}
	return c, nil
}

// assertionIssuer is the iss of the client assertion raw, read before its
// signature is checked, so that its keys can be fetched.
func (s *clientAuth) assertionIssuer(r *http.Request, form url.Values, raw string) (string, *oauthError) {
	if raw == "" {
		return "", s.agentBug(r, "4.1", "invalid_client", "no client_assertion")
	}
	s.addSecret(raw)
	var unverified jwtClaims
	if jws, err := jose.ParseSignedCompact(raw, assertionAlgs); err != nil ||
		json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &unverified) != nil {
		return "", s.agentBug(r, "4.1", "invalid_client", "client_assertion is not a JWT signed with %v", assertionAlgs)
	}
	if id := form.Get("client_id"); id != "" && id != unverified.Iss {
		return "", s.agentBug(r, "4.1", "invalid_client", "client_id %q differs from the client assertion's iss %q", id, unverified.Iss)
	}
	return unverified.Iss, nil
}

// checkClientClaims applies RFC 7523 §3 to a client assertion's claims.
func (s *clientAuth) checkClientClaims(r *http.Request, c *jwtClaims, clientID, endpoint string) *oauthError {
	if c.Iss != clientID || c.Sub != clientID {
		// RFC 7523 §3: for client authentication, sub "MUST be the client_id"
		return s.agentBug(r, "4.1", "invalid_client", "client assertion iss %q and sub %q must both be the client_id %q", c.Iss, c.Sub, clientID)
	}
	auds, _ := c.audiences()
	okAud := false
	for _, a := range auds {
		okAud = okAud || a == s.tokenEndpoint() || a == s.Issuer() || a == endpoint
	}
	if !okAud {
		// RFC 7523 §3: "The JWT MUST contain an "aud" (audience) claim containing a value that identifies the authorization server"
		return s.agentBug(r, "4.1", "invalid_client", "client assertion aud %s names neither %s nor %s", c.Aud, s.tokenEndpoint(), s.Issuer())
	}
	if p := s.timeProblem(c, maxClientAssertionLife, false); p != "" {
		return s.agentBug(r, "4.1", "invalid_client", "client assertion: %s", p)
	}
	if c.Jti == "" {
		return s.agentBug(r, "4.1", "invalid_client", "client assertion has no jti")
	}
	if s.useJTI("client "+clientID, c.Jti, unixTime(*c.Exp)) {
		// RFC 7523 §3: the server "MAY ensure that JWTs are not replayed"; reusing one is an agent bug
		return s.agentBug(r, "4.1", "invalid_client", "client assertion jti %q was used before", c.Jti)
	}
	return nil
}

// personalData matches User IDs that are plainly an email address or a phone number.
var personalData = regexp.MustCompile(`@|^\+?[0-9][0-9 ().-]{6,}$`)

// checkSessionAssertion checks the assertion of a JWT bearer grant (Poppy
// 0.1 §4.2) from the authenticated agent c, and returns its claims.
func (s *clientAuth) checkSessionAssertion(r *http.Request, form url.Values, c *client) (*jwtClaims, *oauthError) {
	raw := form.Get("assertion")
	if raw == "" {
		return nil, s.agentBug(r, "4.2", "invalid_request", "JWT bearer grant without an assertion")
	}
	s.addSecret(raw)
	h, payload, err := verifyJWT(raw, c.keys)
	if err != nil {
		// Poppy 0.1 §4.2: "The Company verifies both assertions against the Personal Agent's jwks_uri"
		return nil, s.agentBug(r, "4.2", "invalid_grant", "Session assertion: %v", err)
	}
	if typ := headerType(h); strings.EqualFold(typ, browserAssertionTyp) {
		// Poppy 0.1 §5: "a browser assertion isn't accepted at the token endpoint"
		return nil, s.agentBug(r, "5", "invalid_grant", "a browser assertion (typ %s) sent to the token endpoint", typ)
	} else if typ != "" && !strings.EqualFold(typ, "JWT") {
		return nil, newError("invalid_grant", "Session assertion typ %q, want JWT or none", typ)
	}
	var claims jwtClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, s.agentBug(r, "4.2", "invalid_grant", "Session assertion claims: %v", err)
	}
	if e := s.checkSessionClaims(r, &claims, c.id); e != nil {
		return nil, e
	}
	return &claims, nil
}

// checkSessionClaims applies Poppy 0.1 §4.2 to a Session assertion's claims.
func (s *clientAuth) checkSessionClaims(r *http.Request, c *jwtClaims, clientID string) *oauthError {
	f := s.flaws()
	if c.Iss != clientID && !f.ForeignIssuer {
		// Poppy 0.1 §4.2: the Company "checks that the assertion's iss is the authenticated client_id"
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion iss %q is not the authenticated client_id %q", c.Iss, clientID)
	}
	if c.Sub == "" {
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion has no sub (User ID)")
	}
	if personalData.MatchString(c.Sub) {
		// Poppy 0.1 §4.2: the User ID "MUST NOT contain or be derived from personal information"
		return s.agentBug(r, "4.2", "invalid_grant", "User ID %q looks like an email address or phone number", c.Sub)
	}
	auds, single := c.audiences()
	switch {
	case s.audienceTaken(auds, single):
	case !single:
		// Poppy 0.1 §4.2: "aud is the Company's token_endpoint, as a single string rather than an array"
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion aud is %s, not a single string", c.Aud)
	default:
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion aud %s is not the token_endpoint %q", c.Aud, s.tokenEndpoint())
	}
	if p := s.timeProblem(c, maxSessionAssertionLife, true); p != "" && !(f.ExpiredAssertions && c.Exp != nil && c.Iat != nil) {
		// Poppy 0.1 §4.2: "The assertion is short-lived"
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion: %s", p)
	}
	if len(c.Jti) < minJTILength {
		// Poppy 0.1 §4.2: "jti is a unique ID for the assertion, with at least 128 random bits"
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion jti %q is shorter than %d characters (128 bits)", c.Jti, minJTILength)
	}
	if s.useJTI("session "+clientID, c.Jti, unixTime(*c.Exp)) && !f.ReplayedAssertions {
		// Poppy 0.1 §4.2: "The Company rejects one it has already seen"
		return s.agentBug(r, "4.2", "invalid_grant", "Session assertion jti %q was used before", c.Jti)
	}
	return nil
}
