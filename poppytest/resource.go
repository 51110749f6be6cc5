package poppytest

// This file is the resource side of Session Tokens (Poppy 0.1 §4.3, §6):
// Authenticate checks the token and proof on an API, conversation or MCP
// request and writes the right challenge when they fail. Feature files call
// it from their handlers. GET https://api.<domain>/poppy/whoami is a
// protected endpoint that returns its Caller, for tests of an agent's
// Session transport.

import (
	"net/http"
	"slices"
	"strings"
)

// resourceAuth is the Server's concern of authenticating requests at its
// resources (Poppy 0.1 §4.3, §6). Its fields are guarded by the Server's mu.
type resourceAuth struct {
	*Server
	usedSeq map[string]uint64 // token use -> the latest seq used at a resource
}

const whoamiPath = "/poppy/whoami"

// Caller is who made an authenticated request: the Session and the token's
// view of it (Poppy 0.1 §4.4: "Each Session Token reflects the Session as it
// was when the token was issued").
type Caller struct {
	SessionID string   `json:"session_id"`
	ClientID  string   `json:"client_id"`
	UserID    string   `json:"user_id"`
	Account   string   `json:"account,omitempty"`
	SignedIn  bool     `json:"signed_in"`
	Scopes    []string `json:"scopes"`
	TokenType string   `json:"token_type"`         // "DPoP" or "Bearer"
	Resource  string   `json:"resource,omitempty"` // the resource the token was issued for
}

// HasScopes reports whether the caller's token grants every one of scopes.
func (c *Caller) HasScopes(scopes ...string) bool {
	for _, sc := range scopes {
		if !slices.Contains(c.Scopes, sc) {
			return false
		}
	}
	return true
}

// installResource registers the whoami endpoint.
func (s *resourceAuth) installResource() {
	s.HandleFunc("api."+s.domain, "GET "+whoamiPath, func(w http.ResponseWriter, r *http.Request) {
		if c, ok := s.Authenticate(w, r, ""); ok {
			writeJSON(w, http.StatusOK, c)
		}
	})
}

// Authenticate checks the Session Token and DPoP proof of a request to a
// protected resource and returns its Caller. On failure it writes the error
// (401 or 403 with WWW-Authenticate) and returns false.
//
// resource names the service: "" for the Company's general APIs and
// conversations, which take any DPoP Session Token issued without a
// resource; otherwise the url or resource of an apis entry of poppy.json,
// which takes only tokens issued for it. An MCP url also takes Bearer tokens
// and is answered with Bearer challenges.
func (s *resourceAuth) Authenticate(w http.ResponseWriter, r *http.Request, resource string) (*Caller, bool) {
	bearerOK := resource != "" && slices.Contains(s.mcpURLs(), resource)
	c, e := s.authenticate(r, resource, bearerOK)
	if e != nil {
		if e.code == "invalid_dpop_proof" || e.code == "use_dpop_nonce" {
			e.status = http.StatusUnauthorized // docs/spec-readings.md "Error codes": 401 at resources
		}
		s.writeResourceError(w, bearerOK, e, "")
		return nil, false
	}
	return c, true
}

func (s *resourceAuth) authenticate(r *http.Request, resource string, bearerOK bool) (*Caller, *oauthError) {
	host := hostOnly(r.Host)
	authz, e := s.authorization(r, host, bearerOK)
	if e != nil {
		return nil, e
	}
	scheme, value, _ := strings.Cut(authz, " ")
	value = strings.TrimSpace(value)
	isDPoP := strings.EqualFold(scheme, "DPoP")
	if !isDPoP && !strings.EqualFold(scheme, "Bearer") {
		return nil, s.agentBug(r, "4.3", "invalid_token", "Authorization scheme %q, want DPoP", scheme)
	}
	if !isDPoP && !bearerOK && !s.flaws().BearerAnywhere {
		// Poppy 0.1 §4.3: Companies "MUST require DPoP everywhere else"
		return nil, s.agentBug(r, "4.3", "invalid_token", "Bearer token at %s%s, which takes only DPoP", host, r.URL.Path)
	}
	tok, sess := s.lookupToken(value)
	if tok == nil {
		return nil, s.unknownToken(r, value)
	}
	if e := s.checkBinding(r, host, value, tok, isDPoP); e != nil {
		return nil, e
	}
	if e := s.checkTokenUse(r, host, resource, tok, sess); e != nil {
		return nil, e
	}
	scheme = "Bearer"
	if isDPoP {
		scheme = "DPoP"
	}
	return &Caller{SessionID: sess.ID, ClientID: sess.ClientID, UserID: sess.UserID, Account: tok.account,
		SignedIn: tok.signedIn, Scopes: slices.Clone(tok.scopes), TokenType: scheme, Resource: tok.resource}, nil
}

// authorization is the one Authorization header of r, at host.
func (s *resourceAuth) authorization(r *http.Request, host string, bearerOK bool) (string, *oauthError) {
	authz := r.Header.Values("Authorization")
	if qs, qv, ok := s.queryToken(r); ok && len(authz) == 0 {
		authz = []string{qs + " " + qv} // Flaws.QueryTokens
	}
	switch {
	case len(authz) == 0 && bearerOK:
		return "", &oauthError{status: http.StatusUnauthorized} // RFC 6750 §3.1: no error code
	case len(authz) == 0:
		// Poppy 0.1 §4.3: "Personal Agents MUST send a Session Token on every API and conversation request"
		s.violate(r, "4.3", "", "%s %s%s without a Session Token", r.Method, host, r.URL.Path)
		return "", &oauthError{status: http.StatusUnauthorized}
	case len(authz) > 1:
		return "", s.agentBug(r, "4.3", "invalid_request", "%d Authorization headers", len(authz))
	}
	return authz[0], nil
}

// lookupToken returns a copy of the token and its Session, or nil.
func (s *resourceAuth) lookupToken(value string) (*token, *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tokens[value]
	if t == nil {
		return nil, nil
	}
	tc := *t
	sc := s.sessions[t.sessionID].clone()
	return &tc, &sc
}

// unknownToken answers a token this Server never issued.
func (s *resourceAuth) unknownToken(r *http.Request, value string) *oauthError {
	if iss, ok := otherCompanies.Load(value); ok && iss != s.Issuer() {
		// Poppy 0.1 §3.2: tokens belong to one Company, identified by its issuer
		return s.agentBug(r, "4.3", "invalid_token", "a Session Token issued by %s sent to %s", iss, s.Issuer())
	}
	return newError("invalid_token", "unknown Session Token")
}

// checkBinding checks the token's scheme and its proof-of-possession.
func (s *resourceAuth) checkBinding(r *http.Request, host, value string, tok *token, isDPoP bool) *oauthError {
	f := s.flaws()
	if !isDPoP {
		if tok.jkt != "" && !f.BearerAnywhere {
			// RFC 9449 §7.1: a DPoP-bound token sent as Bearer loses its binding
			return s.agentBug(r, "4.3", "invalid_token", "a DPoP-bound Session Token sent with the Bearer scheme")
		}
		return nil
	}
	if tok.jkt == "" {
		return s.agentBug(r, "4.3", "invalid_token", "a Bearer Session Token sent with the DPoP scheme")
	}
	if len(r.Header.Values("DPoP")) == 0 && f.MissingProof {
		return nil
	}
	jkt, e := s.checkProof(r, host, value)
	if e != nil {
		return e
	}
	if jkt != tok.jkt && !f.AnyProofKey {
		// Poppy 0.1 §4.3: the Company checks "That key is the one the Session Token is bound to."
		return s.agentBug(r, "4.3", "invalid_dpop_proof", "proof key is not the key the Session Token is bound to")
	}
	return nil
}

// checkTokenUse checks the token's life, Session and resource.
func (s *resourceAuth) checkTokenUse(r *http.Request, host, resource string, tok *token, sess *Session) *oauthError {
	now := s.timeNow()
	switch {
	case tok.revoked || !now.Before(tok.expires):
		return newError("invalid_token", "the Session Token has expired")
	case sess.Ended:
		return newError("invalid_token", "the Session has ended")
	case tok.resource != resource && !s.flaws().AnyResource:
		// Poppy 0.1 §4.3: a Company with separate tokens "accepts a token at such a service only if it was issued for that resource"; §6: an MCP server "MUST accept only tokens issued for its url"
		return s.agentBug(r, "4.3", "invalid_token", "a Session Token issued for resource %q sent to %s%s (resource %q)", tok.resource, host, r.URL.Path, resource)
	}
	if !s.useLatest(tok) {
		// Poppy 0.1 §4.3: "Whenever the Personal Agent gets a new Session
		// Token for a Session, it MUST use the new token from then on." Once
		// a newer token for the same use has been used, this one is refused
		// at once. Not a violation: another process of the agent sharing the
		// Session may have renewed it, and this one learns of it only so.
		return newError("invalid_token", "a newer Session Token of this Session has been used")
	}
	return nil
}

// useLatest records that tok is being used, and reports false when a newer
// token for the same use has been used already.
func (s *resourceAuth) useLatest(tok *token) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := tok.use()
	if tok.seq < s.usedSeq[key] {
		return false
	}
	s.usedSeq[key] = tok.seq
	return true
}

// RequireScopes reports whether c may act with scopes. If not, it writes
// sign_in_required (401) for a signed-out caller, or insufficient_scope (403)
// naming the scopes (Poppy 0.1 §6), and returns false.
func (s *resourceAuth) RequireScopes(w http.ResponseWriter, c *Caller, scopes ...string) bool {
	bearer := c.TokenType == "Bearer"
	switch {
	case !c.SignedIn && len(scopes) > 0:
		s.writeResourceError(w, bearer, newError("sign_in_required", "sign in for %s", strings.Join(scopes, " ")), "")
	case !c.HasScopes(scopes...):
		s.writeResourceError(w, bearer, newError("insufficient_scope", "the token lacks a scope"), strings.Join(scopes, " "))
	default:
		return true
	}
	return false
}
