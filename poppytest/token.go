package poppytest

// This file implements the token endpoint (Poppy 0.1 §4.2, §4.3): every
// request is checked for its DPoP proof and client assertion, then handed to
// the handler of its grant_type. The JWT bearer grant starts and renews
// signed-out Sessions. Other grants (refresh_token, authorization_code,
// device_code) register in s.grants from their own files.

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// sessionTokens is the Server's concern of Sessions and their Session
// Tokens: the token endpoint and its grants, the client assertions and DPoP
// proofs it checks, the agents' documents it fetches, and the
// authentication of every resource request. Its fields are guarded by the
// Server's mu.
type sessionTokens struct {
	*Server
	grants       map[string]grantFunc // grant_type -> handler; written by install only, so read without mu
	sessions     map[string]*Session
	sessionOrder []string
	tokens       map[string]*token // access token -> what it is bound to
	tokenSeq     uint64            // the seq of the latest token issued

	// The checks, each with its own file.
	*clientAuth   // client assertions and the agents' documents (assertion.go, client.go)
	*dpopProofs   // DPoP proofs and nonces (dpop.go)
	*resourceAuth // Session Tokens at resources (resource.go)
}

// maxTokenRequest bounds a token request body.
const maxTokenRequest = 64 << 10

// Session is the Company's record of one Session (Poppy 0.1 §4, §4.4 "How
// sign-in is remembered"). Sessions returns copies.
type Session struct {
	ID       string
	ClientID string
	UserID   string
	Account  string   // the account it is signed in to; "" while signed out
	SignedIn bool     // signed in to Account
	Scopes   []string // account scopes granted; none while signed out
	Ended    bool     // ended by EndSession: renewal gets invalid_session
	Created  time.Time
}

// clone is a deep copy; the caller holds mu if sess is live.
func (sess *Session) clone() Session {
	c := *sess
	c.Scopes = slices.Clone(sess.Scopes)
	return c
}

// token is an issued Session Token, opaque to the agent and bound to
// (Session, DPoP key, resource). Its fields are set under mu.
type token struct {
	sessionID string
	jkt       string // RFC 7638 thumbprint of the DPoP key; "" for a Bearer token
	resource  string // the resource it was issued for; "" for every DPoP service
	scopes    []string
	signedIn  bool
	account   string
	issued    time.Time
	expires   time.Time
	revoked   bool   // by ExpireTokens
	seq       uint64 // order of issue: a token is superseded by any later one for the same use
}

// tokenUse is what a Session Token is for: its Session, its resource and its
// kind. A Session can hold a DPoP token and a Bearer token for each resource
// side by side (Poppy 0.1 §4.3: "A Session can have DPoP and Bearer tokens at
// the same time"); each new one supersedes only the earlier ones of its use.
func (t *token) use() string {
	kind := "DPoP"
	if t.jkt == "" {
		kind = "Bearer"
	}
	return t.sessionID + "\x00" + t.resource + "\x00" + kind
}

// tokenRequest is a token request whose proof and client assertion passed.
type tokenRequest struct {
	r        *http.Request
	form     url.Values
	client   *client
	jkt      string // DPoP key thumbprint; "" for a Bearer (MCP) request
	resource string
}

// grantResult is what a grant decides. The endpoint then issues the Session
// Token and writes the response, with extra (e.g. refresh_token) added.
type grantResult struct {
	sessionID string   // the Session to issue a token for
	scopes    []string // the scopes of the token to issue
	extra     map[string]any
	status    int // the HTTP status of the answer; zero: 200
}

// grantFunc handles one grant_type.
type grantFunc func(ctx context.Context, req *tokenRequest) (*grantResult, *oauthError)

// otherCompanies maps every token any Server in this process issued to its
// issuer, so a token sent to the wrong Company is caught.
var otherCompanies sync.Map

func (s *sessionTokens) tokenEndpoint() string { return s.URL("auth."+s.domain, tokenPath) }

// installToken registers the token endpoint and the JWT bearer grant.
func (s *sessionTokens) installToken() {
	s.grants[grantJWTBearer] = s.jwtBearerGrant
	s.HandleFunc("auth."+s.domain, tokenPath, s.handleToken)
}

func (s *sessionTokens) handleToken(w http.ResponseWriter, r *http.Request) {
	req, e := s.readTokenRequest(r)
	if e == nil {
		var res *grantResult
		if res, e = s.grants[req.form.Get("grant_type")](r.Context(), req); e == nil {
			s.writeToken(w, req, res)
			return
		}
	}
	s.writeTokenError(w, e) // a use_dpop_nonce answer has DPoP-Nonce from ServeHTTP
}

// readTokenRequest parses a token request and checks what every grant
// needs: the form, the grant_type, the resource, the DPoP proof and the
// client assertion.
func (s *sessionTokens) readTokenRequest(r *http.Request) (*tokenRequest, *oauthError) {
	form, e := s.readForm(r)
	if e != nil {
		return nil, e
	}
	if _, ok := s.grants[form.Get("grant_type")]; !ok {
		return nil, newError("unsupported_grant_type", "grant_type %q is not supported", form.Get("grant_type"))
	}
	req := &tokenRequest{r: r, form: form, resource: form.Get("resource")}
	if req.resource != "" && !slices.Contains(s.resources(), req.resource) {
		// RFC 8707 §2: invalid_target; Poppy 0.1 §4.3 resource names a service of poppy.json
		return nil, s.agentBug(r, "4.3", "invalid_target", "resource %q is not a url or resource in poppy.json", req.resource)
	}
	if len(r.Header.Values("DPoP")) > 0 {
		jkt, e := s.checkProof(r, hostOnly(r.Host), "")
		if e != nil {
			return nil, e
		}
		req.jkt = jkt
	} else if !slices.Contains(s.mcpURLs(), req.resource) {
		// Poppy 0.1 §4.3: Companies "MUST require DPoP everywhere else" than MCP
		return nil, s.agentBug(r, "4.3", "invalid_dpop_proof", "token request without a DPoP proof and without resource set to an MCP url")
	}
	c, e := s.authenticateClient(r, form, s.tokenEndpoint())
	if e != nil {
		return nil, e
	}
	req.client = c
	return req, nil
}

// readForm reads an application/x-www-form-urlencoded POST body (RFC 6749
// §3.2), with each parameter at most once.
func (s *sessionTokens) readForm(r *http.Request) (url.Values, *oauthError) {
	if r.Method != http.MethodPost {
		// RFC 6749 §3.2: "The client MUST use the HTTP "POST" method"
		return nil, s.agentBug(r, "4.2", "invalid_request", "%s to %s, want POST", r.Method, r.URL.Path)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, s.agentBug(r, "4.2", "invalid_request", "Content-Type %q, want application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTokenRequest+1))
	if err != nil || len(body) > maxTokenRequest {
		return nil, newError("invalid_request", "body unreadable or larger than %d bytes", maxTokenRequest)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, s.agentBug(r, "4.2", "invalid_request", "body is not form-encoded: %v", err)
	}
	for k, v := range form {
		if len(v) > 1 {
			// RFC 6749 §3.2: "Request and response parameters MUST NOT be included more than once."
			return nil, s.agentBug(r, "4.2", "invalid_request", "parameter %s sent %d times", k, len(v))
		}
	}
	return form, nil
}

// jwtBearerGrant starts a signed-out Session, or renews one named by
// session_id (Poppy 0.1 §4.2).
func (s *sessionTokens) jwtBearerGrant(_ context.Context, req *tokenRequest) (*grantResult, *oauthError) {
	claims, e := s.checkSessionAssertion(req.r, req.form, req.client)
	if e != nil {
		return nil, e
	}
	if !req.form.Has("session_id") {
		if _, e := narrowScopes(req.form, nil); e != nil {
			return nil, e // a new Session is signed out: it has no scopes to grant
		}
	}
	sess, e := s.sessionFor(req, claims.Sub)
	if e != nil {
		return nil, e
	}
	if sess.SignedIn {
		if !s.signOutExpired(sess.ID) {
			// Poppy 0.1 §4.2: "A signed-in Session is renewed with the Account Token instead (4.8)."
			return nil, s.agentBug(req.r, "4.2", "invalid_grant", "Session %s is signed in: renew it with the Account Token", sess.ID)
		}
		sess.SignedIn, sess.Scopes = false, nil
	}
	scopes, e := narrowScopes(req.form, sess.Scopes)
	if e != nil {
		return nil, e
	}
	return &grantResult{sessionID: sess.ID, scopes: scopes}, nil
}

// sessionFor returns a copy of the Session named by session_id, checked
// against the client and User, or of a new signed-out Session when there is
// none.
func (s *sessionTokens) sessionFor(req *tokenRequest, userID string) (Session, *oauthError) {
	id := req.form.Get("session_id")
	s.mu.Lock()
	sess := s.sessions[id]
	if id == "" {
		sess = &Session{ID: "ses_" + randomString(16), ClientID: req.client.id, UserID: userID, Created: s.timeNow()}
		s.sessions[sess.ID] = sess
		s.sessionOrder = append(s.sessionOrder, sess.ID)
	}
	if sess == nil {
		s.mu.Unlock()
		return Session{}, newError("invalid_session", "no Session %s", id)
	}
	snap := sess.clone()
	s.mu.Unlock()
	switch {
	case snap.ClientID != req.client.id || snap.UserID != userID:
		// Poppy 0.1 §4.2: "The Company checks that the Session belongs to the same client_id and User ID as the assertion"
		return Session{}, s.agentBug(req.r, "4.2", "invalid_session", "Session %s belongs to another client_id or User", id)
	case snap.Ended:
		// Poppy 0.1 §4.2: "If it has ended, the Company returns invalid_session"
		return Session{}, newError("invalid_session", "Session %s has ended", id)
	}
	return snap, nil
}

// narrowScopes applies a request's scope parameter to the scopes a Session
// has (Poppy 0.1 §4.3 "Narrower tokens", §4.8: "It can't ask for more.").
func narrowScopes(form url.Values, have []string) ([]string, *oauthError) {
	if !form.Has("scope") {
		return slices.Clone(have), nil
	}
	want := strings.Fields(form.Get("scope"))
	for _, sc := range want {
		if !slices.Contains(have, sc) {
			return nil, newError("invalid_scope", "scope %q is more than the Session has", sc)
		}
	}
	return want, nil
}

// writeToken issues a Session Token for a grant's result and writes the
// token response (Poppy 0.1 §4.2).
func (s *sessionTokens) writeToken(w http.ResponseWriter, req *tokenRequest, res *grantResult) {
	lifetime := s.opts.TokenLifetime
	if lifetime <= 0 {
		lifetime = time.Hour
	}
	value, sess := s.issueToken(req, res, lifetime)
	tokenType := "DPoP"
	if req.jkt == "" {
		tokenType = "Bearer" // Poppy 0.1 §4.3: "token_type is DPoP, or Bearer for a token requested without a proof"
	}
	resp := map[string]any{
		"access_token": value,
		"token_type":   tokenType,
		"expires_in":   int64(lifetime / time.Second), // Poppy 0.1 §4.2: "it MUST be greater than 0"
		"scope":        strings.Join(res.scopes, " "),
		"session_id":   sess.ID,
		"signed_in":    sess.SignedIn,
	}
	for k, v := range res.extra {
		resp[k] = v
	}
	if s.flaws().RenewalDropsSessionID && req.form.Has("session_id") {
		delete(resp, "session_id")
	}
	if !s.flaws().CacheableTokens {
		w.Header().Set("Cache-Control", "no-store") // Poppy 0.1 §4.2, RFC 6749 §5.1
		w.Header().Set("Pragma", "no-cache")
	}
	writeJSON(w, cmp.Or(res.status, http.StatusOK), resp)
}

// issueToken issues a Session Token for the grant's Session, as it is now,
// for lifetime, and returns it with that Session.
func (s *sessionTokens) issueToken(req *tokenRequest, res *grantResult, lifetime time.Duration) (string, Session) {
	now := s.timeNow()
	value := randomString(32)
	s.mu.Lock()
	sess := s.sessions[res.sessionID].clone()
	s.tokenSeq++
	tok := &token{sessionID: sess.ID, jkt: req.jkt, resource: req.resource, scopes: res.scopes,
		signedIn: sess.SignedIn, account: sess.Account, issued: now, expires: now.Add(lifetime), seq: s.tokenSeq}
	s.tokens[value] = tok
	s.mu.Unlock()
	otherCompanies.Store(value, s.Issuer())
	s.addSecret(value)
	s.countServed("session_token")
	return value, sess
}

// poppyAPIs returns the apis of the poppy.json served at each of the
// Company's domains now.
func (s *sessionTokens) poppyAPIs() []map[string]any {
	var out []map[string]any
	for _, d := range s.Domains() { // Poppy 0.1 §3.2: every domain's APIs are the one Company's
		s.mu.Lock()
		doc := s.docs[d+poppyJSONPath]
		s.mu.Unlock()
		if doc == nil {
			continue
		}
		var v struct {
			APIs []map[string]any `json:"apis"`
		}
		_ = json.Unmarshal(doc.body, &v)
		out = append(out, v.APIs...)
	}
	return out
}

// resources lists every url and resource of the served poppy.json's apis:
// the values a token request's resource may take.
func (s *sessionTokens) resources() []string {
	var out []string
	for _, api := range s.poppyAPIs() {
		for _, k := range []string{"url", "resource"} {
			if v, ok := api[k].(string); ok && v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// mcpURLs lists the url of every mcp API in the served poppy.json.
func (s *sessionTokens) mcpURLs() []string {
	var out []string
	for _, api := range s.poppyAPIs() {
		if u, ok := api["url"].(string); ok && api["type"] == "mcp" {
			out = append(out, u)
		}
	}
	return out
}

// EndSession ends the Session id: its tokens stop working (invalid_token)
// and renewing it gets invalid_session (Poppy 0.1 §4.2). It reports whether
// the Session existed.
func (s *sessionTokens) EndSession(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess != nil {
		sess.Ended = true
	}
	return sess != nil
}

// ExpireTokens makes every Session Token issued so far invalid: resources
// answer invalid_token, so the agent must renew.
func (s *sessionTokens) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		t.revoked = true
	}
}

// Sessions returns a copy of every Session, in order of creation.
func (s *sessionTokens) Sessions() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, 0, len(s.sessionOrder))
	for _, id := range s.sessionOrder {
		out = append(out, s.sessions[id].clone())
	}
	return out
}
