package poppytest

// This file implements Account Tokens at the token endpoint (Poppy 0.1
// §4.8, RFC 6749 §6): the refresh_token grant signs a Session in, or starts
// a signed-in Session, and revocation (RFC 7009, Poppy 0.1 §4.9) revokes an
// Account Token and signs out the Sessions signed in with it.

import (
	"context"
	"net/http"
	"slices"
)

// refreshGrant renews or starts a signed-in Session with an Account Token
// (Poppy 0.1 §4.8). Without a DPoP proof and with resource set to an MCP
// url, the token endpoint issues a Bearer token (§4.3).
func (s *signInState) refreshGrant(_ context.Context, req *tokenRequest) (*grantResult, *oauthError) {
	value := req.form.Get("refresh_token")
	if value == "" {
		return nil, s.agentBug(req.r, "4.8", "invalid_request", "refresh_token grant without refresh_token")
	}
	s.mu.Lock()
	at := s.accountTokens[value]
	ref := s.checkAccountTokenLocked(at, req.client.id)
	s.mu.Unlock()
	if ref != nil {
		if at == nil {
			return nil, s.unknownAccountToken(req.r, value)
		}
		return nil, ref.answer(s.Server, req.r, "4.8")
	}
	// Poppy 0.1 §4.8: "scope MAY ask for fewer scopes than the Account Token has ... It can't ask for more."
	scopes, e := narrowScopes(req.form, at.scopes)
	if e != nil {
		return nil, e
	}
	sid := req.form.Get("session_id")
	s.mu.Lock()
	if sid == "" {
		// Poppy 0.1 §4.8: "Without one, it starts a new Session that is already signed in"
		sid = s.newSessionLocked(at.clientID, at.userID).ID
	}
	ref = s.bindSessionLocked(sid, at)
	var extra map[string]any
	if ref == nil && s.opts.RotateRefreshTokens {
		extra = s.rotateLocked(value, at)
	}
	s.mu.Unlock()
	if ref != nil {
		return nil, ref.answer(s.Server, req.r, "4.8")
	}
	if v, ok := extra["refresh_token"].(string); ok {
		s.issuedAccountToken(v)
	}
	return &grantResult{sessionID: sid, scopes: scopes, extra: extra}, nil
}

// checkAccountTokenLocked checks that at may be used by the client now.
// The caller holds mu.
func (s *signInState) checkAccountTokenLocked(at *accountToken, clientID string) *refusal {
	switch {
	case at == nil:
		return &refusal{code: "invalid_grant", desc: "unknown Account Token"}
	case at.clientID != clientID:
		// Poppy 0.1 §4.8: Companies MUST accept an Account Token "only from the client_id it was issued to"
		return &refusal{code: "invalid_grant", desc: "the Account Token was issued to another client_id", bug: true}
	case at.replaced:
		// Poppy 0.1 §4.8: "A Company MAY return a new Account Token in refresh_token. The Personal Agent then MUST use the new one from then on."
		return &refusal{code: "invalid_grant", desc: "the Account Token was replaced by a newer one", bug: true}
	case at.revoked:
		// Poppy 0.1 §4.8: "When the Account Token has expired or been revoked, the Company returns invalid_grant."
		return &refusal{code: "invalid_grant", desc: "the Account Token was revoked"}
	case !at.expires.IsZero() && !s.timeNow().Before(at.expires):
		return &refusal{code: "invalid_grant", desc: "the Account Token has expired"}
	}
	return nil
}

// unknownAccountToken answers an Account Token this Server never issued.
func (s *signInState) unknownAccountToken(r *http.Request, value string) *oauthError {
	if iss, ok := otherCompanies.Load(value); ok && iss != s.Issuer() {
		// Poppy 0.1 §4.8: "Companies MUST accept an Account Token only at their token_endpoint and revocation_endpoint"
		return s.agentBug(r, "4.8", "invalid_grant", "an Account Token issued by %s sent to %s", iss, s.Issuer())
	}
	return newError("invalid_grant", "unknown Account Token")
}

// rotateLocked replaces the Account Token value by a new one with the same
// record and expiry, and returns the response fields that carry it. The
// caller holds mu.
func (s *signInState) rotateLocked(value string, at *accountToken) map[string]any {
	next := *at
	next.scopes = slices.Clone(at.scopes)
	nextValue := "pat_" + randomString(32)
	s.accountTokens[nextValue] = &next
	at.replaced = true
	// Poppy 0.1 §4.8: "Using an Account Token doesn't extend its lifetime."
	return s.accountTokenFields(nextValue, &next)
}

// handleRevoke revokes a token (RFC 7009 §2, Poppy 0.1 §4.9). An Account
// Token's revocation signs out, or with Options.EndSessionsOnSignOut ends,
// every Session signed in with it; a Session Token stops working.
func (s *signInState) handleRevoke(w http.ResponseWriter, r *http.Request) {
	form, e := s.readForm(r)
	var c *client
	if e == nil {
		// Poppy 0.1 §4.9: the agent revokes "at the Company's revocation_endpoint (RFC 7009), with its client assertion"
		c, e = s.authenticateClient(r, form, s.URL("auth."+s.domain, revokePath))
	}
	if e == nil && form.Get("token") == "" {
		e = s.agentBug(r, "4.9", "invalid_request", "revocation request without token") // RFC 7009 §2.1: token REQUIRED
	}
	if e == nil {
		e = s.revoke(r, form.Get("token"), c.id)
	}
	if e != nil {
		s.writeTokenError(w, e)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK) // RFC 7009 §2.2: "The content of the response body is ignored by the client"
}

// revoke revokes value for the client: an Account Token with its family, or
// a Session Token. An unknown token is no error (RFC 7009 §2.2: "invalid
// tokens do not cause an error response").
func (s *signInState) revoke(r *http.Request, value, clientID string) *oauthError {
	s.mu.Lock()
	at := s.accountTokens[value]
	var owner string
	if at != nil {
		owner = at.clientID
	} else if t := s.tokens[value]; t != nil {
		owner = s.sessions[t.sessionID].ClientID
	}
	switch {
	case owner == "":
	case owner != clientID:
		s.mu.Unlock()
		// RFC 7009 §2.1: the server "verifies whether the token was issued to the client making the revocation request. If this validation fails, the request is refused"
		return s.agentBug(r, "4.9", "unauthorized_client", "the token was issued to another client_id")
	case at != nil:
		s.revokeFamilyLocked(at.family)
	default:
		s.tokens[value].revoked = true
	}
	s.mu.Unlock()
	if owner != "" {
		s.countServed("revoked")
	}
	return nil
}
