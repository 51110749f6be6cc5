// This file implements Sessions (Poppy 0.1 §4.2): starting one with the JWT
// bearer grant (RFC 7523 §2.1), renewing it before its Session Token expires
// (one renewal at a time), and starting anew when the Company ended it.

package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// Session is one User at one Company through this agent (Poppy 0.1 §4).
// It is safe for concurrent use.
type Session struct {
	a       *Agent
	company Company
	userID  string
	proof   *ProofKey
	client  *http.Client
	tokenEP string // rate-limit key of the token endpoint

	cell tokenCell // the DPoP Session Token

	// mu guards bearer, account, narrow, changes and stranded.
	mu     sync.Mutex
	bearer map[string]*tokenCell // MCP server url -> its Bearer token
	// account is the Account Token the Session is signed in with; nil when
	// signed out. Renewals use it (Poppy 0.1 §4.2: "A signed-in Session is
	// renewed with the Account Token instead (4.8)").
	account *Account
	// narrow are the scopes asked for with the Account Token; nil: all of
	// its scopes (Poppy 0.1 §4.8: "scope MAY ask for fewer scopes").
	narrow []string
	// changes are what TakeChanges reports next.
	changes []Change
	// stranded says the Session is signed in with no Account Token to renew
	// it with: the Company issued none (breaking Poppy 0.1 §4.4), or refused
	// the one it still signs the Session in with. It matters only while
	// account is nil.
	stranded bool

	h *holding // the Account Token held for the User at the Company

	// syncMu guards gen, and is held while the Session follows what other
	// processes did (elsewhere.go) and while it signs out.
	syncMu sync.Mutex
	// gen is the User's generation at the Company the Session is in step with.
	gen store.Generation
}

// SessionInfo describes a Session without its tokens.
type SessionInfo struct {
	// ID is session_id. It changes when the Company ended the Session and
	// a new one was started in its place.
	ID string
	// SignedIn says whether the Session is signed in to an account.
	SignedIn bool
	// Scopes are the account scopes of the current Session Token.
	Scopes []string
	// ExpiresAt is when the current Session Token expires; the Session
	// renews it before then by itself.
	ExpiresAt time.Time
}

// renewal is one token request shared by everyone waiting for it.
type renewal struct {
	done chan struct{}
	tok  *Token
	err  error
}

// StartSession starts a new signed-out Session for userID, the User's ID
// at this Company (Poppy 0.1 §4.2).
func (a *Agent) StartSession(ctx context.Context, c Company, userID string) (*Session, error) {
	s, err := a.newSession(ctx, c, userID)
	if err != nil {
		return nil, err
	}
	tok, err := s.request(ctx, "")
	if err != nil {
		return nil, err
	}
	s.cell.set(tok)
	return s, nil
}

// ResumeSession continues a Session known by its ID, for example after a
// restart: it renews the Session's token (Poppy 0.1 §4.2 "Renewing"), and
// starts a new Session when the Company has ended that one.
func (a *Agent) ResumeSession(ctx context.Context, c Company, userID, sessionID string) (*Session, error) {
	return a.resume(ctx, c, userID, sessionID, nil, nil)
}

// ResumeSignedInSession continues a Session known by its ID signed in with
// an Account Token held, asking for scopes (nil: all it grants), for
// example after a restart: it renews with the refresh_token grant and the
// session_id, which also signs in a Session that was signed out. When the
// Company ended that Session, or it is signed in to another account, a new
// signed-in Session starts. A refused Account Token is dropped; the Session
// then continues signed out and the error is ErrAccountTokenRefused, with
// the Session.
// Poppy 0.1 §4.2: "A signed-in Session is renewed with the Account Token instead (4.8)."
func (a *Agent) ResumeSignedInSession(ctx context.Context, c Company, userID, sessionID string, acct *Account, scopes []string) (*Session, error) {
	if acct == nil {
		return nil, errors.New("auth: ResumeSignedInSession needs an Account")
	}
	s, err := a.resume(ctx, c, userID, sessionID, acct, scopes)
	if err != nil {
		return nil, err
	}
	if !s.Info().SignedIn {
		return s, ErrAccountTokenRefused
	}
	return s, nil
}

// resume renews the Session sessionID, with acct when not nil.
func (a *Agent) resume(ctx context.Context, c Company, userID, sessionID string, acct *Account, scopes []string) (*Session, error) {
	if sessionID == "" || !printable(sessionID) {
		return nil, errors.New("auth: resume needs a session ID")
	}
	s, err := a.newSession(ctx, c, userID)
	if err != nil {
		return nil, err
	}
	// Set before the first renewal, as StartSignedInSession does, so the
	// grant is the Account Token's (Poppy 0.1 §4.8: "With session_id, it
	// gets a token for that Session, signing it in if it was signed out.").
	s.account, s.narrow = acct, slices.Clone(scopes)
	tok, err := s.renewFrom(ctx, &Token{SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	s.cell.set(tok)
	return s, nil
}

func (a *Agent) newSession(ctx context.Context, c Company, userID string) (*Session, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	// Poppy 0.1 §4.2: the User ID is opaque; we only require it to be a sane sub.
	if userID == "" || !printable(userID) {
		return nil, errors.New("auth: a Session needs a User ID")
	}
	pk, err := a.proofKey(ctx, c.Issuer, userID)
	if err != nil {
		return nil, err
	}
	ep, err := endpointKey(c.TokenEndpoint)
	if err != nil {
		return nil, err
	}
	gen, err := a.generation(ctx, c.Issuer)
	if err != nil {
		return nil, err
	}
	s := &Session{a: a, company: c, userID: userID, proof: pk, tokenEP: ep, bearer: map[string]*tokenCell{},
		h: a.holding(c.Issuer, userID), gen: gen}
	s.client = s.newClient(&sessionTransport{s: s})
	return s, nil
}

// Info returns the Session's ID, state and expiry, never its token.
func (s *Session) Info() SessionInfo {
	tok := s.cell.current()
	return SessionInfo{
		ID: tok.SessionID, SignedIn: tok.SignedIn,
		Scopes: slices.Clone(tok.Scopes), ExpiresAt: tok.ExpiresAt,
	}
}

// Company returns the Company the Session is at.
func (s *Session) Company() Company { return s.company }

// UserID returns the User ID the Session was started for.
func (s *Session) UserID() string { return s.userID }

// Renew gets a new Session Token now.
func (s *Session) Renew(ctx context.Context) error {
	_, err := s.renewAfter(ctx, s.cell.current())
	return err
}

// Client returns the HTTP client through which every API call, conversation
// and sign-in of this Session goes: its transport adds the Session Token and
// a DPoP proof to each request, renews, and retries (docs/architecture.md, "The one Session transport"). It
// follows redirects only within the same origin, so the token never goes
// elsewhere.
func (s *Session) Client() *http.Client { return s.client }

func (s *Session) newClient(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: rt,
		Timeout:   s.a.base.Timeout,
		Jar:       nil, // Poppy 0.1 §4.3: the token goes in the Authorization header, without cookies.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("auth: stopped after 10 redirects")
			}
			if origin(req.URL) != origin(via[0].URL) {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// token returns a Session Token that is not about to expire, renewing it
// first if needed.
func (s *Session) token(ctx context.Context) (*Token, error) {
	return s.cell.get(ctx, s.a, s.tokenEP, s.fetch)
}

// renewAfter returns a Session Token newer than used, renewing unless
// someone already has.
func (s *Session) renewAfter(ctx context.Context, used *Token) (*Token, error) {
	return s.cell.renewAfter(ctx, s.a, s.tokenEP, used, s.fetch)
}

// fetch renews the Session; when the Company started a new Session in place
// of an ended one, or the Session was signed in or out, the Bearer and
// resource tokens issued for its earlier state are dropped.
func (s *Session) fetch(ctx context.Context, used *Token) (*Token, error) {
	tok, err := s.renewFrom(ctx, used)
	if err == nil && (tok.SessionID != used.SessionID || tok.SignedIn != used.SignedIn) {
		s.dropResourceTokens()
	}
	return tok, err
}

// dropResourceTokens forgets the Session's Bearer and resource tokens, so
// they are requested anew for its current state.
func (s *Session) dropResourceTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.bearer)
}

// tokenCell holds one current token and renews it, one renewal at a time:
// concurrent callers share one token request. It is safe for concurrent use.
type tokenCell struct {
	// mu guards tok and flight.
	mu     sync.Mutex
	tok    *Token
	flight *renewal
}

func (c *tokenCell) current() *Token {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tok
}

func (c *tokenCell) set(tok *Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tok = tok
}

// get returns the current token, renewing it first when it is missing or
// about to expire.
func (c *tokenCell) get(ctx context.Context, a *Agent, endpoint string, fetch fetchFunc) (*Token, error) {
	tok := c.current()
	if tok != nil && !a.expiring(tok) {
		return tok, nil
	}
	return c.renewAfter(ctx, a, endpoint, tok, fetch)
}

type fetchFunc func(ctx context.Context, used *Token) (*Token, error)

// renewAfter returns a token newer than used, calling fetch unless someone
// already has or is doing so.
func (c *tokenCell) renewAfter(ctx context.Context, a *Agent, endpoint string, used *Token, fetch fetchFunc) (*Token, error) {
	// A caller whose deadline cannot outlast a rate limit fails at once.
	if err := a.limits.check(ctx, endpoint); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.tok != used && c.tok != nil && !a.expiring(c.tok) {
		tok := c.tok
		c.mu.Unlock()
		return tok, nil
	}
	f := c.flight
	if f == nil {
		f = &renewal{done: make(chan struct{})}
		c.flight = f
		// The renewal serves every waiter, so no one caller's cancellation ends it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.renewTimeout)
		go c.run(rctx, cancel, f, c.tok, fetch)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run is one renewal from the token from (nil: none yet). Its result is
// stored only when no other token (a sign-in's) was set meanwhile, and
// given to the waiters either way.
func (c *tokenCell) run(ctx context.Context, cancel context.CancelFunc, f *renewal, from *Token, fetch fetchFunc) {
	defer cancel()
	used := from
	if used == nil {
		used = &Token{}
	}
	tok, err := fetch(ctx, used)
	c.mu.Lock()
	if err == nil && c.tok == from {
		// Poppy 0.1 §4.3: "Whenever the Personal Agent gets a new Session
		// Token for a Session, it MUST use the new token from then on."
		// A token set during the renewal is newer than its result.
		c.tok = tok
	}
	c.flight = nil
	c.mu.Unlock()
	f.tok, f.err = tok, err
	close(f.done)
}

// expiring reports whether tok is due for renewal: a little before it
// expires, by at most 30 s and at most half its lifetime.
func (a *Agent) expiring(tok *Token) bool {
	early := min(30*time.Second, tok.Lifetime/2)
	return !a.now().Before(tok.ExpiresAt.Add(-early))
}

// renewFrom renews the Session of used, and starts a new Session when the
// Company says it has ended, or that it is signed in to another account than
// the Account Token's.
// Poppy 0.1 §4.2: "If it has ended, the Company returns invalid_session, and
// the Personal Agent starts a new Session."
func (s *Session) renewFrom(ctx context.Context, used *Token) (*Token, error) {
	if used.SessionID != "" && s.isStranded() {
		return s.restart(ctx)
	}
	tok, err := s.request(ctx, used.SessionID)
	if used.SessionID != "" && (errors.Is(err, ErrInvalidSession) || errors.Is(err, ErrAccountMismatch)) {
		// Poppy 0.1 §4.4: "Once it has been, it can't switch to another: the
		// Company returns account_mismatch, and the Personal Agent starts a new Session."
		tok, err = s.request(ctx, "")
	}
	return tok, err
}

// restart starts a new signed-out Session in place of a stranded one, which
// cannot be renewed: Poppy 0.1 §4.2: "A signed-in Session is renewed with the
// Account Token instead (4.8)", and the agent holds none for it. The JWT
// bearer grant for it would be refused, so it is not sent.
func (s *Session) restart(ctx context.Context) (*Token, error) {
	tok, err := s.request(ctx, "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stranded = false
	s.mu.Unlock()
	s.note(ChangeRestarted)
	return tok, nil
}

// isStranded reports whether the Session is signed in with no Account Token
// to renew it with.
func (s *Session) isStranded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stranded && s.account == nil
}

// request asks the token endpoint for a DPoP Session Token: a new Session
// when sessionID is empty, else a renewal of that Session.
func (s *Session) request(ctx context.Context, sessionID string) (*Token, error) {
	return s.grant(ctx, sessionID, "", s.proof)
}

// grant asks for a Session Token for sessionID ("" for a new Session),
// optionally for one resource, with proof (nil: a Bearer token). A Session
// signed in with an Account Token uses the refresh_token grant (Poppy 0.1
// §4.8); one the Company refuses leaves the Session signed out, and the JWT
// bearer grant of §4.2 follows.
func (s *Session) grant(ctx context.Context, sessionID, resource string, proof *ProofKey) (*Token, error) {
	var tok *Token
	err := errAccountDropped
	if acct, scopes := s.signedInWith(); acct != nil {
		tok, err = s.refreshGrant(ctx, acct, sessionID, resource, scopes, proof)
		if errors.Is(err, ErrInvalidGrant) || errors.Is(err, errAccountDropped) {
			// Poppy 0.1 §4.9: the Company "signs out every Session signed in
			// with it": the JWT bearer grant below renews it signed out.
			s.leave(acct)
		}
		if err == nil || errors.Is(err, ErrInvalidGrant) {
			s.mu.Lock()
			s.stranded = false
			s.mu.Unlock()
		}
		if acct.Refused() {
			s.note(ChangeAccountRefused)
		}
	}
	if errors.Is(err, ErrInvalidGrant) || errors.Is(err, errAccountDropped) {
		tok, err = s.a.postToken(ctx, tokenRequest{
			endpoint: s.company.TokenEndpoint,
			form:     s.grantForm(sessionID, resource),
			proof:    proof,
		})
	}
	if err != nil {
		return nil, err
	}
	if tok.SessionID == "" {
		return nil, errors.New("auth: token response has no session_id (Poppy 0.1 §4.2)")
	}
	if sessionID != "" && tok.SessionID != sessionID {
		return nil, fmt.Errorf("auth: renewal of Session %s returned Session %s", sessionID, tok.SessionID)
	}
	return tok, nil
}

// grantForm returns the form builder of the JWT bearer grant that starts
// (sessionID "") or renews a Session, optionally for one resource. Each call
// of the builder signs a new Session assertion.
func (s *Session) grantForm(sessionID, resource string) func() (url.Values, error) {
	return func() (url.Values, error) {
		as, err := s.a.id.SessionAssertion(s.userID, s.company.TokenEndpoint)
		if err != nil {
			return nil, err
		}
		f := url.Values{
			"grant_type": {GrantJWTBearer},
			"assertion":  {as.Reveal()},
		}
		if sessionID != "" {
			// Poppy 0.1 §4.2: "sends the same request with fresh assertions and the session_id"
			f.Set("session_id", sessionID)
		}
		if resource != "" {
			// Poppy 0.1 §4.3: "MUST include resource set to the MCP server's url"
			f.Set("resource", resource)
		}
		return f, nil
	}
}
