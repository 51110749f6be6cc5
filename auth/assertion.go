// This file implements the agent's signed assertions: the client assertion
// (private_key_jwt, RFC 7523 §2.2 and §3), the Session assertion for the JWT
// bearer grant (RFC 7523 §2.1, Poppy 0.1 §4.2) and the browser assertion
// (Poppy 0.1 §5).

package auth

import (
	"errors"
	"fmt"
	"time"
)

// Assertion types (the JOSE "typ" header).
const (
	// TypeJWT is the typ of client and Session assertions.
	TypeJWT = "JWT"
	// TypeBrowser is the typ of browser assertions.
	// Poppy 0.1 §5: "with typ set to poppy-browser+jwt in its header"
	TypeBrowser = "poppy-browser+jwt"
)

// AssertionLifetime is how long an assertion is valid (exp - iat).
// Poppy 0.1 §5: "exp is no more than 60 seconds after iat."
const AssertionLifetime = 60 * time.Second

// Grant and assertion type URNs.
const (
	GrantJWTBearer      = "urn:ietf:params:oauth:grant-type:jwt-bearer"            // RFC 7523 §2.1
	ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" // RFC 7523 §2.2
)

// AssertionClaims are the claims of an assertion. Issuer defaults to the
// agent's client_id; iat, exp and jti are always set by the signer.
type AssertionClaims struct {
	// Subject is sub: the client_id for a client assertion, the User ID for
	// Session and browser assertions. Required.
	Subject string
	// Audience is aud, a single string. Required.
	// Poppy 0.1 §4.2: "aud is the Company's token_endpoint, as a single string rather than an array"
	Audience string
	// SessionID is session_id, for browser assertions. Empty: omitted.
	SessionID string
	// ReturnTo is return_to, for browser assertions. Empty: omitted.
	ReturnTo string
}

// assertionWire is the JWT claims set as it crosses the wire.
type assertionWire struct {
	Iss       string `json:"iss"`
	Sub       string `json:"sub"`
	Aud       string `json:"aud"`
	Iat       int64  `json:"iat"`
	Exp       int64  `json:"exp"`
	Jti       string `json:"jti"`
	SessionID string `json:"session_id,omitempty"`
	ReturnTo  string `json:"return_to,omitempty"`
}

// Sign signs an assertion of the given typ (TypeJWT or TypeBrowser) with the
// current signing key, with a fresh jti, iat now and exp 60 s later. Call it
// again for every attempt: Companies reject a reused jti.
func (id *Identity) Sign(typ string, c AssertionClaims) (Secret, error) {
	if c.Subject == "" || c.Audience == "" {
		return Secret{}, errors.New("auth: assertion needs a subject and an audience")
	}
	if typ != TypeJWT && typ != TypeBrowser {
		return Secret{}, fmt.Errorf("auth: assertion typ %q is neither %s nor %s", typ, TypeJWT, TypeBrowser)
	}
	key, hdr := id.signingKey(typ)
	now := id.now()
	w := assertionWire{
		Iss: id.clientID, // Poppy 0.1 §4.2: "iss is the Personal Agent's client_id (4.1)."
		Sub: c.Subject,
		Aud: c.Audience,
		Iat: now.Unix(),
		Exp: now.Add(AssertionLifetime).Unix(),
		Jti: randomID(),
		// Poppy 0.1 §5: "session_id is the Session the browser joins"
		SessionID: c.SessionID,
		ReturnTo:  c.ReturnTo,
	}
	jws, err := key.sign(hdr, w)
	if err != nil {
		return Secret{}, fmt.Errorf("auth: assertion: %w", err)
	}
	return NewSecret(jws), nil
}

// ClientAssertion signs a client assertion for the token endpoint
// (private_key_jwt): iss and sub are the client_id.
// RFC 7523 §3: "the JWT MUST contain a "sub" (subject) claim ... the "client_id" of the OAuth client."
func (id *Identity) ClientAssertion(tokenEndpoint string) (Secret, error) {
	return id.Sign(TypeJWT, AssertionClaims{Subject: id.clientID, Audience: tokenEndpoint})
}

// SessionAssertion signs the JWT bearer grant assertion that starts or
// renews a Session for userID at the Company's token endpoint.
// Poppy 0.1 §4.2: "naming itself in iss and the User in sub".
func (id *Identity) SessionAssertion(userID, tokenEndpoint string) (Secret, error) {
	return id.Sign(TypeJWT, AssertionClaims{Subject: userID, Audience: tokenEndpoint})
}

// BrowserAssertion signs the assertion a browser posts to the Company's
// web.browser_session_endpoint to join sessionID (Poppy 0.1 §5).
func (id *Identity) BrowserAssertion(userID, endpoint, sessionID, returnTo string) (Secret, error) {
	if sessionID == "" {
		return Secret{}, errors.New("auth: browser assertion needs a session_id")
	}
	return id.Sign(TypeBrowser, AssertionClaims{
		Subject: userID, Audience: endpoint, SessionID: sessionID, ReturnTo: returnTo,
	})
}
