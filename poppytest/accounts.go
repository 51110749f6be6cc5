package poppytest

// This file keeps the Company's accounts and what sign-in remembers (Poppy
// 0.1 §4.4 "How sign-in is remembered"): a record per Account Token (the
// client_id, User ID, account, scopes and expiry) and, per Session, the
// account it is signed in to. The sign-in types (device.go, authorize.go,
// mediated.go) sign a Session in through signInSession, the refresh_token grant
// (refresh.go) through bindSessionLocked, and revocation (revoke.go) signs
// Sessions out through revokeFamilyLocked. It also serves
// GET https://api.<domain>/account, an account-only endpoint.

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

const accountPath = "/account"

// Account is one account at the Company, for the sign-in types to sign in
// to. Mediated Sign-In takes its Email and Password as the credentials
// "email" and "password". String and GoString leave the Password out.
type Account struct {
	ID       string // such as "acct_dana"
	Email    string // the login name on sign-in pages and in credentials
	Password string
	// RequiresCode makes every Mediated Sign-In to the account ask for a
	// one-time code (Poppy 0.1 §4.7).
	RequiresCode bool
	// SentTo is where the code goes, as the code_required answer's
	// code.sent_to shows it.
	SentTo string
	// Credentials are the account's answers to auth.mediated.fields, by
	// field name, for a poppy.json whose fields are not "email" and
	// "password". Nil: Email and Password are the answers.
	Credentials map[string]string
}

// DefaultAccounts returns the accounts a Server has when Options.Accounts is
// nil: acct_dana (dana@example.com, "correct-horse-battery", no one-time
// code) and acct_sam (sam@example.com, "sam-secret-42", always a one-time
// code, sent to "Text to the phone number ending in 71").
func DefaultAccounts() []Account {
	return []Account{
		{ID: "acct_dana", Email: "dana@example.com", Password: "correct-horse-battery"},
		{ID: "acct_sam", Email: "sam@example.com", Password: "sam-secret-42", RequiresCode: true,
			SentTo: "Text to the phone number ending in 71"},
	}
}

// String describes the account without its password or credentials.
func (a Account) String() string {
	creds := ""
	if a.Credentials != nil {
		creds = ", Credentials: [redacted]"
	}
	return fmt.Sprintf("poppytest.Account{ID: %q, Email: %q, Password: [redacted], RequiresCode: %t%s}", a.ID, a.Email, a.RequiresCode, creds)
}

// GoString is String, so %#v leaves the password out too.
func (a Account) GoString() string { return a.String() }

// accountToken is the Company's record of one Account Token (Poppy 0.1
// §4.4). Its fields change under mu.
type accountToken struct {
	clientID string
	userID   string
	account  string
	scopes   []string
	family   string    // the sign-in it comes from; rotation keeps it
	expires  time.Time // zero: never
	revoked  bool
	replaced bool // RotateRefreshTokens gave a newer one for it
}

// signInState is the Server's concern of sign-in: its accounts, every
// sign-in type (Poppy 0.1 §4.4 to §4.7), the pages a person signs in on
// (consent.go), and the Account Tokens they issue. Every field is guarded
// by the Server's mu, except accounts, which is set by install only.
type signInState struct {
	*Server
	accounts       []Account
	accountTokens  map[string]*accountToken // Account Token value -> record
	sessionFamily  map[string]string        // Session ID -> family it is signed in with
	sessionAccount map[string]string        // Session ID -> the account it has ever been signed in to

	// The ways in, each with its own file.
	*deviceFlow   // Device Sign-In (device.go)
	*directFlow   // Direct Sign-In (authorize.go)
	*mediatedFlow // Mediated Sign-In (mediated.go)
}

// installSignIn registers every sign-in capability: the account endpoint,
// Device, Direct and Mediated Sign-In, Account Tokens and revocation.
func (s *signInState) installSignIn() {
	srv := s.Server
	*s = signInState{Server: srv, accounts: DefaultAccounts(),
		accountTokens: map[string]*accountToken{}, sessionFamily: map[string]string{},
		sessionAccount: map[string]string{},
		deviceFlow:     &deviceFlow{Server: srv, devices: map[string]*deviceRequest{}, userCodes: map[string]*deviceRequest{}},
		directFlow:     &directFlow{Server: srv, authRequests: map[string]*authRequest{}, authCodes: map[string]*authCode{}},
		mediatedFlow:   &mediatedFlow{Server: srv, signIns: map[string]*mediatedSignIn{}, failures: map[string]*credentialFailures{}}}
	if s.opts.Accounts != nil {
		s.accounts = slices.Clone(s.opts.Accounts)
	}
	s.HandleFunc("api."+s.domain, "GET "+accountPath, s.handleAccount)
	s.installDevice()
	s.installAuthorize()
	s.installMediated()
	s.grants["refresh_token"] = s.refreshGrant
	s.HandleFunc("auth."+s.domain, "POST "+revokePath, s.handleRevoke)
}

// handleAccount answers GET /account: the signed-in account, for tests of
// signed-in and signed-out behaviour. It needs poppy:read.
func (s *signInState) handleAccount(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Authenticate(w, r, "")
	if !ok || !s.RequireScopes(w, c, "poppy:read") {
		return
	}
	a, _ := s.accountByID(c.Account)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]string{"account": a.ID, "email": a.Email})
}

// accountByID returns the account with id.
func (s *signInState) accountByID(id string) (Account, bool) {
	for _, a := range s.accounts {
		if a.ID == id {
			return a, true
		}
	}
	return Account{}, false
}

// loginMediated returns the account whose mediated sign-in answers creds
// are: its Credentials, or its email and password.
func (s *signInState) loginMediated(creds map[string]string) (Account, bool) {
	for _, a := range s.accounts {
		if a.Credentials == nil {
			continue
		}
		match := len(a.Credentials) > 0
		for name, want := range a.Credentials {
			match = match && subtle.ConstantTimeCompare([]byte(creds[name]), []byte(want)) == 1
		}
		if match {
			return a, true
		}
	}
	return s.login(creds["email"], creds["password"])
}

// login returns the account whose email and password these are.
func (s *signInState) login(email, password string) (Account, bool) {
	for _, a := range s.accounts {
		if strings.EqualFold(a.Email, email) && a.Password == password && password != "" {
			return a, true
		}
	}
	return Account{}, false
}

// poppyAuth returns the auth object of the poppy.json served at Domain now.
func (s *signInState) poppyAuth() map[string]any {
	s.mu.Lock()
	doc := s.docs[s.domain+poppyJSONPath]
	s.mu.Unlock()
	if doc == nil {
		return nil
	}
	var v struct {
		Auth map[string]any `json:"auth"`
	}
	_ = json.Unmarshal(doc.body, &v)
	return v.Auth
}

// typeScopes returns the scopes the sign-in type kind ("direct", "device"
// or "mediated") of the served poppy.json can grant.
func (s *signInState) typeScopes(kind string) []string {
	t, _ := s.poppyAuth()[kind].(map[string]any)
	list, _ := t["scopes"].([]any)
	var out []string
	for _, v := range list {
		if sc, ok := v.(string); ok {
			out = append(out, sc)
		}
	}
	return out
}

// requestedScopes applies Poppy 0.1 §4.4 to the scope of a sign-in request
// of type kind. present says whether the request had a scope at all.
func (s *signInState) requestedScopes(r *http.Request, section, kind, raw string, present bool) ([]string, *oauthError) {
	want := strings.Fields(raw)
	if !present || len(want) == 0 {
		// Poppy 0.1 §4.4: "Each sign-in request MUST include scope as a space-separated string"
		return nil, s.agentBug(r, section, "invalid_scope", "%s sign-in request without scope", kind)
	}
	offered := s.typeScopes(kind)
	var out []string
	for _, sc := range want {
		if !slices.Contains(offered, sc) {
			// Poppy 0.1 §4.4: "Missing, unknown, or unavailable scopes are rejected with invalid_scope."
			code := "invalid_scope"
			if s.flaws().UnknownScopeInvalidRequest {
				code = "invalid_request"
			}
			return nil, newError(code, "scope %q is not offered by %s sign-in", sc, kind)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// grantedScopes is what the User approves of requested: approved, or all of
// requested when approved is empty. Poppy 0.1 §4.4: "The Company MUST NOT
// grant scopes beyond those requested and allowed for the type used."
func grantedScopes(requested, approved []string) ([]string, error) {
	if len(approved) == 0 {
		return slices.Clone(requested), nil
	}
	var out []string
	for _, sc := range requested {
		if slices.Contains(approved, sc) {
			out = append(out, sc)
		}
	}
	for _, sc := range approved {
		if !slices.Contains(requested, sc) {
			return nil, fmt.Errorf("poppytest: scope %q was not requested (requested %q)", sc, requested)
		}
	}
	return out, nil
}

// checkSignInGrant applies what every sign-in grant at the token endpoint
// needs beyond the proof and client assertion: a DPoP proof and a session_id
// (Poppy 0.1 §4.5, §4.6). It returns the session_id.
func (s *signInState) checkSignInGrant(section string, req *tokenRequest) (string, *oauthError) {
	if req.jkt == "" {
		// Poppy 0.1 §4.5, §4.6: the request carries "a DPoP Proof, and the session_id"
		return "", s.agentBug(req.r, section, "invalid_dpop_proof", "%s grant without a DPoP proof", req.form.Get("grant_type"))
	}
	sid := req.form.Get("session_id")
	if sid == "" {
		return "", s.agentBug(req.r, section, "invalid_request", "%s grant without session_id", req.form.Get("grant_type"))
	}
	return sid, nil
}

// signInSession issues an Account Token for account with scopes to the client and
// signs the Session sid in with it (Poppy 0.1 §4.4: "the Company returns an
// Account Token as refresh_token, and a signed-in Session Token for the
// current Session"). It returns the grant's result and the token's family.
func (s *signInState) signInSession(r *http.Request, section, sid, clientID, account string, scopes []string) (*grantResult, string, *oauthError) {
	if s.flaws().ExtraScopes {
		for _, sc := range []string{scopeRead, scopeWrite} {
			if !slices.Contains(scopes, sc) {
				scopes = append(slices.Clone(scopes), sc)
			}
		}
	}
	value := "pat_" + randomString(32)
	at := &accountToken{clientID: clientID, account: account, scopes: slices.Clone(scopes), family: "fam_" + randomString(12)}
	if l := s.opts.AccountTokenLifetime; l > 0 {
		at.expires = s.timeNow().Add(l)
	}
	s.mu.Lock()
	if sess := s.sessions[sid]; sess != nil {
		at.userID = sess.UserID
	}
	ref := s.bindSessionLocked(sid, at)
	if ref == nil {
		s.accountTokens[value] = at
	}
	s.mu.Unlock()
	if ref != nil {
		return nil, "", ref.answer(s.Server, r, section)
	}
	if s.opts.NoAccountTokens {
		// Kept, so revocation by account still signs the Session out, but never sent.
		return &grantResult{sessionID: sid, scopes: slices.Clone(scopes), extra: map[string]any{}}, at.family, nil
	}
	s.issuedAccountToken(value)
	return &grantResult{sessionID: sid, scopes: slices.Clone(scopes), extra: s.accountTokenFields(value, at)}, at.family, nil
}

// issuedAccountToken remembers a new Account Token as a secret of this Company.
func (s *signInState) issuedAccountToken(value string) {
	s.addSecret(value)
	otherCompanies.Store(value, s.Issuer())
	s.countServed("account_token")
}

// accountTokenFields are the response fields of an Account Token (§4.4).
func (s *signInState) accountTokenFields(value string, at *accountToken) map[string]any {
	extra := map[string]any{"refresh_token": value}
	if !at.expires.IsZero() {
		// Poppy 0.1 §4.4: "refresh_token_expires_in is the Account Token's lifetime in seconds, if the Company sets one."
		extra["refresh_token_expires_in"] = int64(at.expires.Sub(s.timeNow()) / time.Second)
	}
	return extra
}

// refusal is a request refused under mu: the answer, and whether it shows
// an agent bug, to report once mu is released.
type refusal struct {
	code, desc string
	bug        bool
}

// answer returns the error answer, reporting a violation of section first
// when the refusal shows an agent bug. The caller must not hold mu.
func (ref *refusal) answer(s *Server, r *http.Request, section string) *oauthError {
	if ref.bug {
		return s.agentBug(r, section, ref.code, "%s", ref.desc)
	}
	return newError(ref.code, "%s", ref.desc)
}

// bindSessionLocked signs the Session sid in with the Account Token at, or
// says why it may not be (Poppy 0.1 §4.4, §4.8). The caller holds mu.
func (s *signInState) bindSessionLocked(sid string, at *accountToken) *refusal {
	sess := s.sessions[sid]
	switch {
	case sess == nil:
		return &refusal{code: "invalid_session", desc: "no Session " + sid}
	case sess.ClientID != at.clientID || sess.UserID != at.userID:
		// Poppy 0.1 §4.8: "The Session MUST belong to the same client_id and User ID as the Account Token"
		return &refusal{code: "invalid_session", desc: "Session " + sid + " belongs to another client_id or User", bug: true}
	case sess.Ended:
		return &refusal{code: "invalid_session", desc: "Session " + sid + " has ended"}
	}
	if prev := s.sessionAccount[sid]; prev != "" && prev != at.account {
		// Poppy 0.1 §4.4: "A Session is signed in to at most one account. Once it has been, it can't switch to another: the Company returns account_mismatch"
		return &refusal{code: "account_mismatch", desc: "Session " + sid + " has been signed in to another account"}
	}
	sess.SignedIn, sess.Account, sess.Scopes = true, at.account, slices.Clone(at.scopes)
	s.sessionFamily[sid] = at.family
	s.sessionAccount[sid] = at.account
	return nil
}

// newSessionLocked starts a Session for the client and User; the caller
// holds mu.
func (s *signInState) newSessionLocked(clientID, userID string) *Session {
	sess := &Session{ID: "ses_" + randomString(16), ClientID: clientID, UserID: userID, Created: s.timeNow()}
	s.sessions[sess.ID] = sess
	s.sessionOrder = append(s.sessionOrder, sess.ID)
	return sess
}

// revokeFamilyLocked revokes every Account Token of family and signs out
// every Session signed in with it (Poppy 0.1 §4.9). It returns how many
// Account Tokens that were still usable it revoked. The caller holds mu.
func (s *signInState) revokeFamilyLocked(family string) int {
	n := 0
	for _, at := range s.accountTokens {
		if at.family == family && !at.revoked {
			if !at.replaced {
				n++
			}
			at.revoked = true
		}
	}
	signedOut := map[string]bool{}
	for sid, f := range s.sessionFamily {
		if f != family {
			continue
		}
		delete(s.sessionFamily, sid)
		sess := s.sessions[sid]
		// Poppy 0.1 §4.9: "The Company revokes the Account Token and signs out every Session signed in with it."
		sess.SignedIn, sess.Account, sess.Scopes = false, "", nil
		// Poppy 0.1 §4.9: "A Company MAY end the Sessions instead"
		sess.Ended = sess.Ended || s.opts.EndSessionsOnSignOut
		signedOut[sid] = true
	}
	for _, t := range s.tokens {
		if signedOut[t.sessionID] && t.signedIn && !s.opts.LateSignOut {
			// Poppy 0.1 §4.9: "Companies SHOULD check on each request whether the Session is still signed in"
			t.signedIn, t.account, t.scopes = false, "", nil
		}
	}
	return n
}

// signOutExpired signs the Session sid out when no Account Token it
// was signed in with is usable any more because they expired, and reports
// whether it did. Poppy 0.1 §4.8: "When the Account Token has expired ...
// The Session continues signed out": the agent renews it with the JWT bearer
// grant then. The caller must not hold mu.
func (s *signInState) signOutExpired(sid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	family, now := s.sessionFamily[sid], s.timeNow()
	expired := false
	for _, at := range s.accountTokens {
		if at.family != family || at.revoked || at.replaced {
			continue
		}
		if at.expires.IsZero() || now.Before(at.expires) {
			return false // one is still usable: renew with it
		}
		expired = true
	}
	if expired {
		delete(s.sessionFamily, sid)
		sess := s.sessions[sid]
		sess.SignedIn, sess.Account, sess.Scopes = false, "", nil
	}
	return expired
}

// RevokeAccountTokens revokes every Account Token for account, of every
// agent, and signs out the Sessions signed in with them, as when the User
// disconnects the agent in the account settings (Poppy 0.1 §4.9). It
// returns how many usable Account Tokens it revoked.
func (s *signInState) RevokeAccountTokens(account string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	families := map[string]bool{}
	for _, at := range s.accountTokens {
		if at.account == account && !at.revoked {
			families[at.family] = true
		}
	}
	n := 0
	for f := range families {
		n += s.revokeFamilyLocked(f)
	}
	return n
}

// SignedInSessions returns a copy of every Session signed in now, in order
// of creation.
func (s *signInState) SignedInSessions() []Session {
	var out []Session
	for _, sess := range s.Sessions() {
		if sess.SignedIn {
			out = append(out, sess)
		}
	}
	return out
}
