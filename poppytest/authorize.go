package poppytest

// This file implements Direct Sign-In (Poppy 0.1 §4.5): the authorization
// code flow with PKCE (RFC 6749 §4.1, RFC 7636) and the iss response
// parameter (RFC 9207). GET /oauth/authorize checks the request and shows
// the consent page; POST /oauth/authorize takes the User's answer and sends
// the browser back to the agent; the authorization_code grant exchanges the
// code for an Account Token and a signed-in Session Token.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// directFlow is sign-in's concern of Direct Sign-In (Poppy 0.1 §4.5).
// Its fields are guarded by the Server's mu.
type directFlow struct {
	*Server
	authRequests map[string]*authRequest
	authCodes    map[string]*authCode
}

// authCodeLife is how long an authorization code lives (RFC 6749 §4.1.2:
// "A maximum authorization code lifetime of 10 minutes is RECOMMENDED").
const authCodeLife = 10 * time.Minute

// authRequest is an authorization request waiting for the User. Its fields
// are set when it is made, except done, which changes under mu.
type authRequest struct {
	id          string
	client      *client
	redirectURI string
	state       string
	scopes      []string
	challenge   string
	done        bool
}

// authCode is an issued authorization code. Its fields change under mu.
type authCode struct {
	clientID    string
	redirectURI string
	challenge   string
	account     string
	scopes      []string
	expires     time.Time
	used        bool
	family      string // of the Account Token issued for it
}

// installAuthorize registers the authorization endpoint and grant.
func (s *directFlow) installAuthorize() {
	auth := "auth." + s.domain
	s.HandleFunc(auth, "GET "+authorizePath, s.handleAuthorize)
	s.HandleFunc(auth, "POST "+authorizePath, s.handleAuthorizePost)
	s.grants["authorization_code"] = s.authorizationCodeGrant
}

// handleAuthorize checks an authorization request and shows the consent
// page. Without a valid client_id and redirect_uri it shows an error page
// and does not redirect (RFC 6749 §4.1.2.1); other errors go back to the
// agent with error, state and iss.
func (s *directFlow) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, e := s.authorizeClient(r, q)
	if e != nil {
		s.countServed(e.code)
		writePage(w, e.status, pageData{Title: "Sign-in error", Message: e.code + ": " + e.desc})
		return
	}
	ar := &authRequest{id: randomString(16), client: c, redirectURI: q.Get("redirect_uri"),
		state: q.Get("state"), challenge: q.Get("code_challenge")}
	if ar.scopes, e = s.checkAuthorizeParams(r, q); e != nil {
		s.countServed(e.code)
		http.Redirect(w, r, s.authResponse(ar, url.Values{"error": {e.code}, "error_description": {e.desc}}), http.StatusSeeOther)
		return
	}
	s.mu.Lock()
	s.authRequests[ar.id] = ar
	s.mu.Unlock()
	writePage(w, http.StatusOK, pageData{Title: "Sign in to " + s.domain, ClientName: c.name,
		Scopes: s.scopeChoices(ar.scopes), Action: authorizePath, Hidden: map[string]string{"request": ar.id}})
}

// authorizeClient checks client_id and redirect_uri, the parameters an
// error cannot be redirected without.
func (s *directFlow) authorizeClient(r *http.Request, q url.Values) (*client, *oauthError) {
	id := q.Get("client_id")
	if id == "" || len(q["client_id"]) > 1 {
		return nil, s.agentBug(r, "4.5", "invalid_request", "authorization request needs exactly one client_id")
	}
	c, _, e := s.loadClient(r, id, false)
	if e != nil {
		return nil, e
	}
	if uri := q.Get("redirect_uri"); len(q["redirect_uri"]) != 1 || !slices.Contains(c.redirectURIs, uri) {
		// Poppy 0.1 §4.5: "redirect_uri MUST exactly match an entry in the Personal Agent's redirect_uris (4.1)."
		return nil, s.agentBug(r, "4.5", "invalid_request", "redirect_uri %q is not one of the client's redirect_uris", uri)
	}
	return c, nil
}

// checkAuthorizeParams checks the rest of an authorization request and
// returns the scopes requested.
func (s *directFlow) checkAuthorizeParams(r *http.Request, q url.Values) ([]string, *oauthError) {
	for k, v := range q {
		if len(v) > 1 {
			// RFC 6749 §3.1: "Request and response parameters MUST NOT be included more than once."
			return nil, s.agentBug(r, "4.5", "invalid_request", "parameter %s sent %d times", k, len(v))
		}
	}
	switch {
	case q.Get("response_type") != "code":
		// Poppy 0.1 §4.5: "response_type=code"; RFC 6749 §4.1.2.1
		return nil, s.agentBug(r, "4.5", "unsupported_response_type", "response_type %q, want code", q.Get("response_type"))
	case q.Get("state") == "":
		// Poppy 0.1 §4.5: "The Personal Agent creates a random state"
		return nil, s.agentBug(r, "4.5", "invalid_request", "authorization request without state")
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		// Poppy 0.1 §4.5: PKCE; the metadata offers only S256 (RFC 7636 §4.4.1)
		return nil, s.agentBug(r, "4.5", "invalid_request", "code_challenge %q with method %q, want an S256 challenge",
			q.Get("code_challenge"), q.Get("code_challenge_method"))
	}
	if b, err := base64.RawURLEncoding.DecodeString(q.Get("code_challenge")); err != nil || len(b) != sha256.Size {
		// RFC 7636 §4.2: S256 code_challenge = BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))
		return nil, s.agentBug(r, "4.5", "invalid_request", "code_challenge is not a base64url SHA-256 hash")
	}
	return s.requestedScopes(r, "4.5", "direct", q.Get("scope"), q.Has("scope"))
}

// authResponse is the redirect_uri with params, the state and iss added
// (RFC 6749 §4.1.2, RFC 9207 §2).
func (s *directFlow) authResponse(ar *authRequest, params url.Values) string {
	u, _ := url.Parse(ar.redirectURI) // checked against the client's redirect_uris
	q := u.Query()                    // RFC 6749 §3.1.2: the query component "MUST be retained"
	for k, v := range params {
		q[k] = v
	}
	if ar.state != "" {
		q.Set("state", ar.state)
	}
	q.Set("iss", s.Issuer()) // RFC 9207 §2: also on error responses
	u.RawQuery = q.Encode()
	return u.String()
}

// handleAuthorizePost takes the User's answer on the consent page.
func (s *directFlow) handleAuthorizePost(w http.ResponseWriter, r *http.Request) {
	form, ok := readPageForm(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	ar := s.authRequests[form.Get("request")]
	s.mu.Unlock()
	if ar == nil {
		writePage(w, http.StatusBadRequest, pageData{Title: "Sign-in error", Message: "This sign-in request is unknown or finished."})
		return
	}
	var (
		to  string
		err error
	)
	if form.Get("action") == "deny" {
		to, err = s.decideAuthorization(ar, "", nil)
	} else {
		p := pageData{Title: "Sign in to " + s.domain, ClientName: ar.client.name, Scopes: s.scopeChoices(ar.scopes),
			Action: authorizePath, Hidden: map[string]string{"request": ar.id}}
		a, scopes, ok := s.pageLogin(w, form, p)
		if !ok {
			return
		}
		to, err = s.decideAuthorization(ar, a.ID, scopes)
	}
	if err != nil {
		writePage(w, http.StatusBadRequest, pageData{Title: "Sign-in error", Message: err.Error()})
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// decideAuthorization answers ar: approved for account with scopes (all
// requested when empty), or declined when account is "". It returns the URL
// the browser goes back to.
func (s *directFlow) decideAuthorization(ar *authRequest, account string, scopes []string) (string, error) {
	var granted []string
	if account != "" {
		if _, ok := s.accountByID(account); !ok {
			return "", fmt.Errorf("poppytest: no account %q", account)
		}
		var err error
		if granted, err = grantedScopes(ar.scopes, scopes); err != nil {
			return "", err
		}
	}
	code := randomString(24)
	s.mu.Lock()
	done := ar.done
	ar.done = true
	if !done && account != "" {
		s.authCodes[code] = &authCode{clientID: ar.client.id, redirectURI: ar.redirectURI, challenge: ar.challenge,
			account: account, scopes: granted, expires: s.timeNow().Add(authCodeLife)}
	}
	s.mu.Unlock()
	switch {
	case done:
		return "", errors.New("poppytest: the sign-in request was already answered")
	case account == "":
		// Poppy 0.1 §4.5: "If the User declines, the redirect carries error=access_denied and iss instead."
		return s.authResponse(ar, url.Values{"error": {"access_denied"}}), nil
	}
	s.addSecret(code)
	// Poppy 0.1 §4.5: "redirects the browser to redirect_uri with a one-time code, the same state, and its auth.issuer in iss"
	return s.authResponse(ar, url.Values{"code": {code}}), nil
}

// pendingAuthorization returns the latest unanswered request with state.
func (s *directFlow) pendingAuthorization(state string) (*authRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *authRequest
	for _, ar := range s.authRequests {
		if ar.state == state && !ar.done {
			found = ar
		}
	}
	if found == nil {
		return nil, fmt.Errorf("poppytest: no pending authorization request with state %q", state)
	}
	return found, nil
}

// ApproveAuthorization approves the pending authorization request with
// state for account, as the User does on the consent page, with scopes:
// some or all of those requested, or all when none are given. It returns the
// URL the Company sends the browser to: redirect_uri with code, state and iss.
func (s *directFlow) ApproveAuthorization(state, account string, scopes ...string) (redirectURL string, err error) {
	ar, err := s.pendingAuthorization(state)
	if err != nil {
		return "", err
	}
	if account == "" {
		return "", errors.New("poppytest: ApproveAuthorization needs an account")
	}
	return s.decideAuthorization(ar, account, scopes)
}

// DenyAuthorization declines the pending authorization request with state.
// It returns the URL the Company sends the browser to: redirect_uri with
// error=access_denied, state and iss.
func (s *directFlow) DenyAuthorization(state string) (redirectURL string, err error) {
	ar, err := s.pendingAuthorization(state)
	if err != nil {
		return "", err
	}
	return s.decideAuthorization(ar, "", nil)
}

// authorizationCodeGrant exchanges a code (Poppy 0.1 §4.5 step 4, RFC 6749
// §4.1.3, RFC 7636 §4.6).
func (s *directFlow) authorizationCodeGrant(_ context.Context, req *tokenRequest) (*grantResult, *oauthError) {
	code := req.form.Get("code")
	if code == "" {
		return nil, s.agentBug(req.r, "4.5", "invalid_request", "authorization_code grant without code")
	}
	s.addSecret(req.form.Get("code_verifier")) // IssuedSecrets: for leak scans of the agent's output
	sid, e := s.checkSignInGrant("4.5", req)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	ac := s.authCodes[code]
	ref := s.redeemLocked(ac, req)
	s.mu.Unlock()
	if ref != nil {
		return nil, ref.answer(s.Server, req.r, "4.5")
	}
	res, family, e := s.signInSession(req.r, "4.5", sid, req.client.id, ac.account, ac.scopes)
	if e == nil {
		s.mu.Lock()
		ac.family = family
		s.mu.Unlock()
	}
	return res, e
}

// redeemLocked checks and uses up a code; nil means it may be exchanged.
// The caller holds mu.
func (s *directFlow) redeemLocked(ac *authCode, req *tokenRequest) *refusal {
	switch {
	case ac == nil:
		return &refusal{code: "invalid_grant", desc: "unknown authorization code"}
	case ac.clientID != req.client.id:
		// RFC 6749 §4.1.3: "ensure that the authorization code was issued to the authenticated confidential client"
		return &refusal{code: "invalid_grant", desc: "the code was issued to another client", bug: true}
	case ac.used:
		// RFC 6749 §4.1.2: "If an authorization code is used more than once, the authorization server MUST deny the request and SHOULD revoke ... all tokens previously issued based on that authorization code."
		if ac.family != "" {
			s.revokeFamilyLocked(ac.family)
		}
		return &refusal{code: "invalid_grant", desc: "the authorization code was used before", bug: true}
	}
	ac.used = true
	switch {
	case !s.timeNow().Before(ac.expires):
		return &refusal{code: "invalid_grant", desc: "the authorization code has expired"}
	case req.form.Get("redirect_uri") != ac.redirectURI:
		// RFC 6749 §4.1.3: redirect_uri must be present and its value identical
		return &refusal{code: "invalid_grant", desc: "redirect_uri differs from the authorization request's", bug: true}
	}
	sum := sha256.Sum256([]byte(req.form.Get("code_verifier")))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(ac.challenge)) != 1 {
		// RFC 7636 §4.6: "If the values are not equal, an error response indicating "invalid_grant" ... MUST be returned."
		return &refusal{code: "invalid_grant", desc: "code_verifier does not match the code_challenge", bug: true}
	}
	return nil
}
