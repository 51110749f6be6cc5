package poppytest

// This file implements Mediated Sign-In (Poppy 0.1 §4.7): the agent posts
// the User's credentials to auth.mediated.endpoint with its Session Token,
// and the Company signs the Session in, or asks for a one-time code first.
// Answers carry status complete, code_required or failed; wrong credentials
// are 400 with error invalid_credentials, and too many attempts 429
// (docs/spec-readings.md, "Sessions and sign-in"). No answer ever carries a credential.

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// mediatedFlow is sign-in's concern of Mediated Sign-In (Poppy 0.1 §4.7).
// Its fields are guarded by the Server's mu.
type mediatedFlow struct {
	*Server
	signIns  map[string]*mediatedSignIn
	failures map[string]*credentialFailures // client_id + User ID -> wrong credentials
}

const (
	// maxMediatedBody bounds a mediated sign-in request body.
	maxMediatedBody = 16 << 10
	// signInLife is how long a one-time code can be submitted.
	signInLife = 10 * time.Minute
	// credentialLockout is how long a client and User wait after
	// Options.MediatedAttempts wrong credentials in a row.
	credentialLockout = time.Minute
)

// mediatedSignIn is a sign-in waiting for its one-time code. Its fields
// change under mu.
type mediatedSignIn struct {
	sessionID string // Poppy 0.1 §4.7: "Only the Session that started a sign-in can finish it."
	clientID  string
	host      string // the host of the endpoint the credentials went to
	account   string
	scopes    []string
	code      string
	sentTo    string
	expires   time.Time
	attempts  int  // wrong codes so far
	finished  bool // complete or failed
}

// credentialFailures counts wrong credentials of one client and User.
type credentialFailures struct {
	count int
	until time.Time // attempts before this get 429
	told  bool      // a 429 with Retry-After was sent for this lockout
}

// mediatedField is one entry of auth.mediated.fields.
type mediatedField struct {
	Name   string `json:"name"`
	Secret *bool  `json:"secret"`
}

// installMediated registers the mediated sign-in endpoint and its code step.
func (s *mediatedFlow) installMediated() { s.installMediatedOn("auth." + s.domain) }

// installMediatedOn registers the mediated sign-in endpoint and its code
// step on the host auth.
func (s *mediatedFlow) installMediatedOn(auth string) {
	s.HandleFunc(auth, "POST "+mediatedPath, s.handleMediated)
	s.HandleFunc(auth, "POST "+mediatedPath+"/{id}", s.handleMediatedCode)
	s.HandleFunc(auth, "POST "+MediatedMovedPath, s.handleMovedMediated)
}

// mediatedAttempts is Options.MediatedAttempts, 3 when zero.
func (s *mediatedFlow) mediatedAttempts() int {
	if s.opts.MediatedAttempts > 0 {
		return s.opts.MediatedAttempts
	}
	return 3
}

// mediatedFields returns auth.mediated.fields of the served poppy.json.
func (s *mediatedFlow) mediatedFields() []mediatedField {
	m, _ := s.poppyAuth()["mediated"].(map[string]any)
	raw, _ := json.Marshal(m["fields"])
	var fields []mediatedField
	_ = json.Unmarshal(raw, &fields)
	return fields
}

// writeMediated writes a mediated sign-in answer that is not complete.
func (s *mediatedFlow) writeMediated(w http.ResponseWriter, status int, body map[string]any) {
	key, _ := body["status"].(string)
	code, ok := body["error"].(string)
	if ok {
		s.countServed(code)
	}
	if key == "" || key == "failed" {
		key = code
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, s.mediatedStatus(w, key, status), body)
}

// mediatedStatus is the status line of a mediated answer whose body says
// key: Options.MediatedHTTPStatus's, or def. A 401 gets the challenge RFC
// 9110 §15.5.2 requires ("MUST send a WWW-Authenticate header field").
func (s *mediatedFlow) mediatedStatus(w http.ResponseWriter, key string, def int) int {
	status, ok := s.opts.MediatedHTTPStatus[key]
	if !ok {
		return def
	}
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `DPoP algs="ES256"`)
	}
	return status
}

// failed is the body of a failed sign-in.
func failed(e *oauthError) map[string]any {
	return map[string]any{"status": "failed", "error": e.code, "error_description": e.desc}
}

// readMediatedBody reads a JSON request body into v, recording the values
// of every credential not marked "secret": false as secrets first.
func (s *mediatedFlow) readMediatedBody(r *http.Request, v any) *oauthError {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return s.agentBug(r, "4.7", "invalid_request", "Content-Type %q, want application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMediatedBody+1))
	if err != nil || len(body) > maxMediatedBody {
		return newError("invalid_request", "body unreadable or larger than %d bytes", maxMediatedBody)
	}
	var creds struct {
		Credentials map[string]any `json:"credentials"`
		Code        any            `json:"code"`
	}
	_ = json.Unmarshal(body, &creds)
	public := map[string]bool{}
	for _, f := range s.mediatedFields() {
		public[f.Name] = f.Secret != nil && !*f.Secret
	}
	for name, val := range creds.Credentials {
		if v, ok := val.(string); ok && !public[name] {
			s.addSecret(v) // IssuedSecrets: for leak scans of the agent's output
		}
	}
	if c, ok := creds.Code.(string); ok {
		s.addSecret(c)
	}
	if json.Unmarshal(body, v) != nil {
		// The decoder's message may quote the body, so it is left out: Poppy 0.1 §4.7 "MUST NOT return credentials in any response"
		return s.agentBug(r, "4.7", "invalid_request", "body is not the JSON object of §4.7 with string values")
	}
	return nil
}

// MediatedMovedPath is where Options.MediatedRedirect sends the posts to
// auth.mediated.endpoint.
const MediatedMovedPath = "/poppy/sign-in-moved"

// handleMovedMediated takes credentials posted where a redirect of the
// mediated endpoint pointed (Options.MediatedRedirect), as the endpoint
// would, so that an agent that follows it gets signed in and the test
// sees it did; it is the agent's violation.
func (s *mediatedFlow) handleMovedMediated(w http.ResponseWriter, r *http.Request) {
	// Poppy 0.1 §4.7: "Personal Agents MUST NOT send credentials to any endpoint other than the Company's auth.mediated.endpoint."
	s.violate(r, "4.7", "", "credentials sent to %s, where a redirect of auth.mediated.endpoint pointed", MediatedMovedPath)
	s.takeCredentials(w, r)
}

// handleMediated takes credentials (Poppy 0.1 §4.7), or redirects them
// elsewhere (Options.MediatedRedirect).
func (s *mediatedFlow) handleMediated(w http.ResponseWriter, r *http.Request) {
	if status := s.opts.MediatedRedirect; status != 0 {
		http.Redirect(w, r, MediatedMovedPath, status)
		return
	}
	s.takeCredentials(w, r)
}

// takeCredentials signs a Session in with the credentials posted.
func (s *mediatedFlow) takeCredentials(w http.ResponseWriter, r *http.Request) {
	c, ok := s.mediatedCaller(w, r)
	if !ok {
		return
	}
	var req struct {
		Scope       *string           `json:"scope"`
		Credentials map[string]string `json:"credentials"`
	}
	if e := s.readMediatedBody(r, &req); e != nil {
		s.writeMediated(w, e.status, failed(e))
		return
	}
	key := c.ClientID + "\x00" + c.UserID
	if s.credentialGate(w, r, key) {
		return
	}
	scopes, e := s.requestedScopes(r, "4.7", "mediated", deref(req.Scope), req.Scope != nil)
	if e == nil {
		e = s.checkCredentialFields(r, req.Credentials)
	}
	if e != nil {
		s.writeMediated(w, e.status, failed(e))
		return
	}
	a, ok := s.checkLogin(w, key, req.Credentials)
	if !ok {
		return
	}
	if a.RequiresCode {
		s.askForCode(w, hostOnly(r.Host), c, a, scopes)
		return
	}
	s.completeMediated(w, r, c, a.ID, scopes)
}

// mediatedCaller authenticates a post of credentials, which needs a Session
// Token (Poppy 0.1 §4.7) unless Flaws.MediatedWithoutToken.
func (s *mediatedFlow) mediatedCaller(w http.ResponseWriter, r *http.Request) (*Caller, bool) {
	if len(r.Header.Values("Authorization")) > 0 || !s.flaws().MediatedWithoutToken {
		return s.Authenticate(w, r, "")
	}
	return &Caller{}, true
}

// checkLogin finds the account of credentials, counting a wrong answer
// against key (client_id and User ID) and answering it, or clearing key's
// failures.
func (s *mediatedFlow) checkLogin(w http.ResponseWriter, key string, credentials map[string]string) (Account, bool) {
	a, ok := s.loginMediated(credentials)
	if !ok {
		s.credentialFailed(key)
		// docs/spec-readings.md (our reading): wrong credentials are status failed with error invalid_credentials, HTTP 400 here
		s.writeMediated(w, http.StatusBadRequest, failed(newError("invalid_credentials", "wrong credentials")))
		return Account{}, false
	}
	s.mu.Lock()
	delete(s.failures, key)
	s.mu.Unlock()
	return a, true
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// checkCredentialFields checks that credentials has every field of
// auth.mediated.fields and no other.
func (s *mediatedFlow) checkCredentialFields(r *http.Request, creds map[string]string) *oauthError {
	var names []string
	for _, f := range s.mediatedFields() {
		names = append(names, f.Name)
		if _, ok := creds[f.Name]; !ok {
			// Poppy 0.1 §4.7: "The Personal Agent sends every field in credentials to auth.mediated.endpoint"
			return s.agentBug(r, "4.7", "invalid_request", "credentials lack the field %q", f.Name)
		}
	}
	for name := range creds {
		if !slices.Contains(names, name) {
			// Poppy 0.1 §4.7: auth.mediated.fields "lists the ones the Company needs"
			return s.agentBug(r, "4.7", "invalid_request", "credentials have the field %q, which auth.mediated.fields does not list", name)
		}
	}
	return nil
}

// credentialGate answers 429 when the client and User are locked out after
// too many wrong credentials. Poppy 0.1 §4.7: "A Company that offers
// Mediated Sign-In MUST rate-limit attempts".
func (s *mediatedFlow) credentialGate(w http.ResponseWriter, r *http.Request, key string) bool {
	now := s.timeNow()
	s.mu.Lock()
	f := s.failures[key]
	if f == nil || !now.Before(f.until) {
		if f != nil && !f.until.IsZero() {
			delete(s.failures, key) // the lockout is over: count afresh
		}
		s.mu.Unlock()
		return false
	}
	early := f.told
	f.told = true
	wait := f.until.Sub(now)
	s.mu.Unlock()
	if early {
		// Poppy 0.1 §4.3: "The Personal Agent MUST wait at least that long before sending the request again."
		s.violate(r, "4.3", "", "POST %s%s sent %s before Retry-After allowed", hostOnly(r.Host), r.URL.Path, wait.Round(time.Millisecond))
	}
	w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
	s.writeMediated(w, http.StatusTooManyRequests, map[string]any{"error": "rate_limited",
		"error_description": "too many wrong credentials: wait before trying again"})
	return true
}

// credentialFailed counts wrong credentials of key, locking it out at the limit.
func (s *mediatedFlow) credentialFailed(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.failures[key]
	if f == nil {
		f = &credentialFailures{}
		s.failures[key] = f
	}
	if f.count++; f.count >= s.mediatedAttempts() {
		f.until, f.told = s.timeNow().Add(credentialLockout), false
	}
}

// askForCode starts a sign-in waiting for a one-time code (Poppy 0.1 §4.7
// "One-time codes").
func (s *mediatedFlow) askForCode(w http.ResponseWriter, host string, c *Caller, a Account, scopes []string) {
	id := "sgn_" + randomString(9)
	si := &mediatedSignIn{sessionID: c.SessionID, clientID: c.ClientID, host: host, account: a.ID, scopes: scopes,
		code: sixDigits(), sentTo: a.SentTo, expires: s.timeNow().Add(signInLife)}
	s.mu.Lock()
	s.signIns[id] = si
	s.mu.Unlock()
	s.addSecret(si.code)
	s.writeMediated(w, http.StatusOK, codeRequired(id, si))
}

// codeRequired is the code_required answer of a sign-in.
func codeRequired(id string, si *mediatedSignIn) map[string]any {
	return map[string]any{"status": "code_required", "sign_in_id": id,
		"code": map[string]string{"sent_to": si.sentTo}, "expires_at": si.expires.Format(time.RFC3339)}
}

// sixDigits is a random six-digit one-time code.
func sixDigits() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	return fmt.Sprintf("%06d", n.Int64())
}

// completeMediated signs the caller's Session in and writes complete with
// the tokens of §4.4; the new Session Token is bound to the caller's key.
func (s *mediatedFlow) completeMediated(w http.ResponseWriter, r *http.Request, c *Caller, account string, scopes []string) {
	res, _, e := s.signInSession(r, "4.7", c.SessionID, c.ClientID, account, scopes)
	if e != nil {
		s.writeMediated(w, e.status, failed(e))
		return
	}
	res.extra["status"] = "complete"
	res.status = s.mediatedStatus(w, "complete", http.StatusOK)
	_, value, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	tok, _ := s.lookupToken(strings.TrimSpace(value))
	s.writeToken(w, &tokenRequest{r: r, jkt: tok.jkt}, res)
}

// handleMediatedCode takes a one-time code for a sign-in (Poppy 0.1 §4.7).
func (s *mediatedFlow) handleMediatedCode(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Authenticate(w, r, "")
	if !ok {
		return
	}
	id := r.PathValue("id")
	code, si, e := s.readCodeStep(r, id)
	if e != nil {
		s.writeMediated(w, e.status, failed(e))
		return
	}
	s.mu.Lock()
	ref, again := s.checkCodeLocked(si, c, code)
	s.mu.Unlock()
	switch {
	case ref != nil:
		e := ref.answer(s.Server, r, "4.7")
		if ref.code == "not_found" {
			e.status = http.StatusNotFound
		}
		s.writeMediated(w, e.status, failed(e))
	case again:
		// Poppy 0.1 §4.7: "A wrong code returns code_required again, until the Company's attempt limit, and then failed."
		s.writeMediated(w, http.StatusOK, codeRequired(id, si))
	default:
		s.completeMediated(w, r, c, si.account, si.scopes)
	}
}

// readCodeStep reads the code step of the mediated sign-in id: its code,
// and the sign-in (nil if there is none).
func (s *mediatedFlow) readCodeStep(r *http.Request, id string) (string, *mediatedSignIn, *oauthError) {
	var req struct {
		Code        string          `json:"code"`
		Credentials json.RawMessage `json:"credentials"`
	}
	e := s.readMediatedBody(r, &req)
	if e == nil && req.Credentials != nil {
		// Poppy 0.1 §4.7: the agent "submits only the code, not the credentials again"
		e = s.agentBug(r, "4.7", "invalid_request", "the code step carries credentials")
	}
	s.mu.Lock()
	si := s.signIns[id]
	s.mu.Unlock()
	if e == nil && si != nil && si.host != hostOnly(r.Host) {
		// Poppy 0.1 §4.7: the code goes to the endpoint the credentials went to (its example: POST https://auth.example.com/poppy/sign-in/sgn_3Hq8)
		e = s.agentBug(r, "4.7", "invalid_request", "the code of a sign-in started at %s was sent to %s", si.host, hostOnly(r.Host))
	}
	return req.Code, si, e
}

// checkCodeLocked decides a code submitted for si by the caller: a refusal,
// code_required again, or (nil, false) to complete. The caller holds mu.
func (s *mediatedFlow) checkCodeLocked(si *mediatedSignIn, c *Caller, code string) (*refusal, bool) {
	switch {
	case si == nil:
		return &refusal{code: "not_found", desc: "no such sign-in", bug: true}, false
	case si.sessionID != c.SessionID:
		// Poppy 0.1 §4.7: "Only the Session that started a sign-in can finish it."
		return &refusal{code: "invalid_session", desc: "the sign-in was started by another Session", bug: true}, false
	case si.finished:
		return &refusal{code: "invalid_request", desc: "the sign-in has already finished", bug: true}, false
	case !s.timeNow().Before(si.expires):
		si.finished = true
		return &refusal{code: "expired_token", desc: "the sign-in has expired"}, false
	}
	if subtle.ConstantTimeCompare([]byte(code), []byte(si.code)) == 1 {
		si.finished = true
		return nil, false
	}
	if si.attempts++; si.attempts >= s.mediatedAttempts() {
		si.finished = true
		return &refusal{code: "invalid_code", desc: "too many wrong codes"}, false
	}
	return nil, true
}

// LastCode returns the one-time code sent for the mediated sign-in
// signInID, as the User would read it from their phone, or "".
func (s *mediatedFlow) LastCode(signInID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if si := s.signIns[signInID]; si != nil {
		return si.code
	}
	return ""
}
