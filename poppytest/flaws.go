package poppytest

// This file lists the Company-side rules the Server can be told to break,
// one at a time, so that a tool that checks a Company (poppy-mcp check
// --live) can be shown to catch each one. A Server with a flaw still reports
// the agent's violations it sees; it only stops enforcing the rule named.

import (
	"net/http"
	"slices"
)

// Flaws make the Server break Company-side rules of Poppy 0.1. Each field
// names one rule; several may be set together. The zero value breaks
// nothing: the Server is as strict as the spec lets a Company be.
type Flaws struct {
	// Token endpoint and Sessions (§4.2).

	// ReplayedAssertions accepts a Session assertion whose jti it has
	// already accepted (§4.2: "The Company rejects one it has already seen").
	ReplayedAssertions bool `json:"replayed_assertions,omitempty"`
	// ArrayAudience accepts a Session assertion whose aud is an array that
	// names the token endpoint (§4.2: "as a single string rather than an array").
	ArrayAudience bool `json:"array_audience,omitempty"`
	// AnyAudience accepts a Session assertion whose aud is any single
	// string, not only the token endpoint.
	AnyAudience bool `json:"any_audience,omitempty"`
	// ExpiredAssertions accepts Session assertions whatever their iat and exp.
	ExpiredAssertions bool `json:"expired_assertions,omitempty"`
	// ForeignIssuer accepts a Session assertion whose iss is not the
	// authenticated client_id (§4.2: the Company "checks that the
	// assertion's iss is the authenticated client_id").
	ForeignIssuer bool `json:"foreign_issuer,omitempty"`
	// RenewalDropsSessionID leaves session_id out of the answer to a
	// renewal (§4.2 lists it in every token response).
	RenewalDropsSessionID bool `json:"renewal_drops_session_id,omitempty"`
	// CacheableTokens leaves Cache-Control: no-store out of token responses
	// (§4.2's response, RFC 6749 §5.1).
	CacheableTokens bool `json:"cacheable_tokens,omitempty"`
	// AnyNonce still asks for DPoP nonces, but takes any nonce a proof
	// carries, not only the one it issued (RFC 9449 §4.3 check 10, §8).
	AnyNonce bool `json:"any_nonce,omitempty"`

	// Resources: APIs and conversations (§4.3, §6).

	// IgnoreHTM takes a proof whatever its htm (§4.3: "htm and htu match the request").
	IgnoreHTM bool `json:"ignore_htm,omitempty"`
	// IgnoreHTU takes a proof whatever its htu.
	IgnoreHTU bool `json:"ignore_htu,omitempty"`
	// AnyProofKey takes a proof signed by any key, not only the one the
	// Session Token is bound to (§4.3: "That key is the one the Session
	// Token is bound to").
	AnyProofKey bool `json:"any_proof_key,omitempty"`
	// MissingProof takes a DPoP Session Token sent without a DPoP proof.
	MissingProof bool `json:"missing_proof,omitempty"`
	// BearerAnywhere takes the Bearer scheme at every resource, for any
	// token, DPoP-bound ones included (§4.3: Companies "MUST require DPoP
	// everywhere else" than MCP).
	BearerAnywhere bool `json:"bearer_anywhere,omitempty"`
	// QueryTokens takes a Session Token from an access_token query
	// parameter when the request has no Authorization header (§4.3:
	// "Companies MUST NOT accept them from one").
	QueryTokens bool `json:"query_tokens,omitempty"`
	// AnyResource takes a token issued for one resource at every other
	// (§4.3 "Narrower tokens"; §6: an MCP server "MUST accept only tokens
	// issued for its url").
	AnyResource bool `json:"any_resource,omitempty"`

	// Sign-in (§4.4-4.9).

	// UnknownScopeInvalidRequest answers a sign-in request with an unknown
	// scope with invalid_request (§4.4: "Missing, unknown, or unavailable
	// scopes are rejected with invalid_scope").
	UnknownScopeInvalidRequest bool `json:"unknown_scope_invalid_request,omitempty"`
	// MediatedWithoutToken takes Mediated Sign-In requests that carry no
	// Session Token (§4.7: the agent sends them "with its current Session
	// Token"), as a signed-out caller of no Session.
	MediatedWithoutToken bool `json:"mediated_without_token,omitempty"`
	// ExtraScopes grants poppy:read and poppy:write at every sign-in, asked
	// for or not (§4.4: "The Company MUST NOT grant scopes beyond those
	// requested and allowed for the type used").
	ExtraScopes bool `json:"extra_scopes,omitempty"`

	// Conversations (§7).

	// DuplicateMessages adds a message again whenever the agent resends its
	// ID, as if it were new (§7.3: "it returns the original response and
	// doesn't add the message again"; a resent first message starts another
	// conversation).
	DuplicateMessages bool `json:"duplicate_messages,omitempty"`
}

// flaws returns the Server's flaws.
func (s *sessionTokens) flaws() Flaws { return s.opts.Flaws }

// queryToken returns the Session Token of an access_token query parameter
// when Flaws.QueryTokens takes one, with the scheme it is taken as: DPoP
// when a proof came with it. ok is false otherwise.
func (s *sessionTokens) queryToken(r *http.Request) (scheme, value string, ok bool) {
	if !s.flaws().QueryTokens {
		return "", "", false
	}
	v := r.URL.Query()["access_token"]
	if len(v) != 1 || v[0] == "" {
		return "", "", false
	}
	if len(r.Header.Values("DPoP")) > 0 {
		return "DPoP", v[0], true
	}
	return "Bearer", v[0], true
}

// audienceTaken reports whether a Session assertion's aud is taken: the
// token endpoint as a single string, or what a flaw lets through.
func (s *sessionTokens) audienceTaken(auds []string, single bool) bool {
	f := s.flaws()
	switch {
	case !single:
		return f.ArrayAudience && slices.Contains(auds, s.tokenEndpoint())
	case f.AnyAudience:
		return len(auds) == 1
	}
	return len(auds) == 1 && auds[0] == s.tokenEndpoint()
}
