// This file holds the one hook `poppy-mcp check --live` (package livecheck)
// needs to break a rule on purpose: an assertion with claims of its
// choosing, so it can show that a Company refuses what Poppy 0.1 §4.2 says
// it must (an array or foreign aud, an expired assertion, an iss that is not
// the client). Nothing on the agent's own paths calls it.

package auth

import (
	"errors"
	"time"
)

// ProbeClaims are the claims of a deliberately wrong Session assertion.
type ProbeClaims struct {
	// Issuer is iss. Zero: the agent's client_id.
	Issuer string
	// Subject is sub, the User ID. Required.
	Subject string
	// Audience is aud exactly as it goes on the wire: a string, or a
	// []string for an assertion the Company must refuse (Poppy 0.1 §4.2:
	// "as a single string rather than an array"). Required.
	Audience any
	// IssuedAt is iat. Zero: now.
	IssuedAt time.Time
	// Expires is exp. Zero: IssuedAt plus AssertionLifetime.
	Expires time.Time
}

// probeWire is a probe assertion's claims as they cross the wire.
type probeWire struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud any    `json:"aud"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
	Jti string `json:"jti"`
}

// SignProbeAssertion signs a Session assertion (typ JWT) with the current
// signing key and a fresh jti, with the claims given even where they break
// Poppy 0.1 §4.2. It exists for check --live alone: a Company that accepts
// what it signs has a security bug. The agent never sends one.
func (id *Identity) SignProbeAssertion(c ProbeClaims) (Secret, error) {
	if c.Subject == "" || c.Audience == nil {
		return Secret{}, errors.New("auth: probe assertion needs a subject and an audience")
	}
	if c.Issuer == "" {
		c.Issuer = id.clientID
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = id.now()
	}
	if c.Expires.IsZero() {
		c.Expires = c.IssuedAt.Add(AssertionLifetime)
	}
	key, hdr := id.signingKey(TypeJWT)
	w := probeWire{Iss: c.Issuer, Sub: c.Subject, Aud: c.Audience, Iat: c.IssuedAt.Unix(), Exp: c.Expires.Unix(), Jti: randomID()}
	jws, err := key.sign(hdr, w)
	if err != nil {
		return Secret{}, err
	}
	return NewSecret(jws), nil
}
