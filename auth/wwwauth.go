// This file implements a parser for the WWW-Authenticate header field
// (RFC 9110 §11.6.1), in which resources report DPoP and Bearer errors
// (RFC 9449 §7.1, RFC 6750 §3).

package auth

import (
	"net/http"
	"strings"
)

// Challenge is one authentication challenge.
type Challenge struct {
	// Scheme is the auth-scheme as sent. Compare it with strings.EqualFold:
	// RFC 9110 §11.1: "It uses a case-insensitive token to identify the authentication scheme".
	Scheme string
	// Params are the auth-params, keyed by lower-cased name.
	// RFC 9110 §11.2: "Parameter names are matched case-insensitively."
	Params map[string]string
	// Token68 is the token68 form, when the challenge has one instead of params.
	Token68 string
}

// maxChallenges bounds the work on a hostile header.
const maxChallenges = 32

// ParseChallenges parses every WWW-Authenticate field line in h.
// Malformed parts end the parse of their line; what came before is kept.
func ParseChallenges(h http.Header) []Challenge {
	var out []Challenge
	for _, line := range h.Values("WWW-Authenticate") {
		out = append(out, ParseWWWAuthenticate(line)...)
		if len(out) > maxChallenges {
			return out[:maxChallenges]
		}
	}
	return out
}

// FindChallenge returns the first challenge with the scheme, matched
// case-insensitively.
func FindChallenge(cs []Challenge, scheme string) (Challenge, bool) {
	for _, c := range cs {
		if strings.EqualFold(c.Scheme, scheme) {
			return c, true
		}
	}
	return Challenge{}, false
}

// ParseWWWAuthenticate parses one WWW-Authenticate field value:
//
//	WWW-Authenticate = #challenge
//	challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//	auth-param = token BWS "=" BWS ( token / quoted-string )
//
// (RFC 9110 §11.6.1, §11.2). Parsing stops at the first malformed part.
func ParseWWWAuthenticate(v string) []Challenge {
	p := &chalParser{s: v}
	var out []Challenge
	for len(out) < maxChallenges {
		p.skipListSep()
		if p.done() {
			break
		}
		scheme := p.token()
		if scheme == "" {
			break
		}
		c := Challenge{Scheme: scheme, Params: map[string]string{}}
		if !p.challengeBody(&c) {
			out = append(out, c)
			break
		}
		out = append(out, c)
	}
	return out
}

type chalParser struct {
	s string
	i int
}

func (p *chalParser) done() bool { return p.i >= len(p.s) }

func (p *chalParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *chalParser) skipWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// skipListSep skips OWS and empty list elements (RFC 9110 §5.6.1).
func (p *chalParser) skipListSep() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

func (p *chalParser) token() string {
	start := p.i
	for !p.done() && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// challengeBody reads the token68 or auth-params after a scheme. It returns
// false when the header is malformed and parsing must stop.
func (p *chalParser) challengeBody(c *Challenge) bool {
	p.skipWS()
	if p.done() || p.peek() == ',' {
		return true // a scheme with no params
	}
	if t, ok := p.token68(); ok {
		c.Token68 = t
		return true
	}
	for first := true; ; first = false {
		save := p.i
		name := p.token()
		if name == "" {
			return false
		}
		p.skipWS()
		if p.peek() != '=' {
			if first {
				return false // "Scheme tok tok": neither token68 nor params
			}
			p.i = save // after a comma, a bare token starts the next challenge
			return true
		}
		p.i++
		p.skipWS()
		val, ok := p.value()
		if !ok {
			return false
		}
		key := strings.ToLower(name)
		if _, dup := c.Params[key]; !dup { // RFC 9110 §11.2: "MUST NOT appear more than once"; keep the first
			c.Params[key] = val
		}
		p.skipWS()
		if p.done() {
			return true
		}
		if p.peek() != ',' {
			return false
		}
		p.skipListSep()
		if p.done() {
			return true
		}
	}
}

// token68 reads a token68 when the rest of this challenge is exactly one:
// token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
// followed by OWS and the end or a comma. Otherwise it consumes nothing.
func (p *chalParser) token68() (string, bool) {
	j := p.i
	for j < len(p.s) && isToken68Char(p.s[j]) {
		j++
	}
	if j == p.i {
		return "", false
	}
	k := j
	for k < len(p.s) && p.s[k] == '=' {
		k++
	}
	end := k
	for end < len(p.s) && (p.s[end] == ' ' || p.s[end] == '\t') {
		end++
	}
	if end < len(p.s) && p.s[end] != ',' {
		return "", false // it is an auth-param ("name=value") or a new scheme
	}
	t := p.s[p.i:k]
	p.i = end
	return t, true
}

func (p *chalParser) value() (string, bool) {
	if p.peek() != '"' {
		t := p.token()
		return t, t != ""
	}
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return b.String(), true
		case c == '\\':
			// RFC 9110 §5.6.4: quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
			if p.done() {
				return "", false
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '\t' || c >= 0x20 && c != 0x7f:
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return "", false // unterminated
}

// isTchar reports whether c is a tchar (RFC 9110 §5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken68Char(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}
