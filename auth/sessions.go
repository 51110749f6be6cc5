package auth

// This file keeps one person's Session with each Company (Poppy 0.1 §4.2,
// §3.2): opened on first use, resumed from what an earlier run saved when
// no other process uses it (ClaimSession), replaced by a new one on request
// or when the Company ended it, saved after each change of its sign-in,
// and its claim given back on Close.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// maxResumeTries bounds the saved Sessions looked at on a start.
const maxResumeTries = 3

// Sessions is one person's Session with each Company, by issuer: one
// Session per Company, shared by every caller, whichever of the Company's
// domains they came through (Poppy 0.1 §3.2: the domains of one issuer
// "are then one Company: the same User IDs (4.2), Sessions, and Account
// Tokens apply to all of them"). It is safe for concurrent use.
type Sessions struct {
	agent *Agent       // the person's view of the Agent (Agent.WithStore)
	store *store.Store // the person's view of the store
	log   *slog.Logger

	// mu guards byIssuer; each entry has its own lock, held while its
	// Session starts, so that concurrent callers share one Session.
	mu       sync.Mutex
	byIssuer companySessions
}

// companySessions are a person's Sessions by issuer.
type companySessions map[string]*companySession

// companySession is the Session with one Company.
type companySession struct {
	// mu guards everything below; it is held while the Session starts.
	mu     sync.Mutex
	sess   *Session
	domain string // the domain the Session was started through, as saved
	userID string
	// claim is this process's claim on sess (ClaimSession); nil when it
	// could not be claimed.
	claim *SessionClaim
}

// release gives the claim back, if any.
func (e *companySession) release() {
	if e.claim != nil {
		e.claim.Release()
		e.claim = nil
	}
}

// NewSessions returns the Sessions of the person whose views of the Agent
// and of the store a and st are. log receives what could not be saved or
// claimed; nil discards it.
func NewSessions(a *Agent, st *store.Store, log *slog.Logger) *Sessions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sessions{agent: a, store: st, log: log, byIssuer: companySessions{}}
}

// entry returns the Session state of the Company issuer, creating it.
func (ss *Sessions) entry(issuer string) *companySession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e := ss.byIssuer[issuer]
	if e == nil {
		e = &companySession{}
		ss.byIssuer[issuer] = e
	}
	return e
}

// Current returns the Session with the Company issuer, or nil before the
// first.
func (ss *Sessions) Current(issuer string) *Session {
	e := ss.entry(issuer)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sess
}

// Issuers returns the Companies, by issuer, with which the person has a
// Session in this process.
func (ss *Sessions) Issuers() []string {
	ss.mu.Lock()
	entries := maps.Clone(ss.byIssuer)
	ss.mu.Unlock()
	var out []string
	for issuer, e := range entries {
		e.mu.Lock()
		if e.sess != nil {
			out = append(out, issuer)
		}
		e.mu.Unlock()
	}
	return out
}

// Open returns the Session with the Company c, through its domain
// c.Domain, starting one when there is none, when fresh is set, or when
// the Session was forgotten (`poppy-mcp forget`: a new User ID). A Session
// an earlier run saved is continued while the Company has it and no other
// process uses it (Poppy 0.1 §4.2: the Company decides how long a Session
// lasts); it starts signed in when an Account Token is held (§4.8). The
// Session started is saved, never its token. after runs with the Session
// while the Company's lock is still held (nil: nothing).
func (ss *Sessions) Open(ctx context.Context, c Company, fresh bool, after func(*Session)) (*Session, error) {
	e := ss.entry(c.Issuer)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := ss.ensure(ctx, e, c, fresh); err != nil {
		return nil, err
	}
	if after != nil {
		after(e.sess)
	}
	return e.sess, nil
}

// ensure starts or resumes e's Session through c.Domain; e.mu is held.
func (ss *Sessions) ensure(ctx context.Context, e *companySession, c Company, fresh bool) error {
	if e.sess != nil && !fresh && !e.sess.Gone(ctx) { // Gone: `poppy-mcp forget` ran: a new User ID
		return nil
	}
	userID, err := ss.store.UserID(ctx, c.Issuer) // Poppy 0.1 §4.2: a User ID per person per Company
	if err != nil {
		return err
	}
	e.userID = userID
	var saved string
	var claim *SessionClaim
	if !fresh {
		saved, claim = ss.saved(ctx, c.Issuer, userID)
	}
	sess, err := ss.agent.Open(ctx, c, userID, saved)
	if err != nil {
		claim.release()
		return err
	}
	if id := sess.Info().ID; id != saved {
		if saved != "" {
			ss.log.InfoContext(ctx, "the saved Session could not be continued; a new one started", "issuer", c.Issuer)
		}
		claim.release()
		claim = ss.claim(ctx, c.Issuer, id)
	}
	e.release() // the Session it replaces
	e.sess, e.domain, e.claim = sess, c.Domain, claim
	return ss.save(ctx, c.Issuer, e)
}

// release gives the claim back, if any.
func (c *SessionClaim) release() {
	if c != nil {
		c.Release()
	}
}

// saved returns the ID of the newest Session an earlier run saved for
// userID that no other process or replica is using now, claimed for this
// one, or "" (ClaimSession: two processes must not continue one Session).
func (ss *Sessions) saved(ctx context.Context, issuer, userID string) (string, *SessionClaim) {
	saved, err := ss.store.Sessions(ctx, issuer)
	if err != nil {
		return "", nil
	}
	for i, rec := range saved {
		if i == maxResumeTries || rec.UserID != userID {
			break
		}
		claim, ok, err := ClaimSession(ctx, ss.store, issuer, rec.ID)
		if err != nil {
			break
		}
		if ok {
			return rec.ID, claim
		}
	}
	return "", nil
}

// claim claims the new Session id for this process; a new Session's claim
// is free, so a failure (the database briefly away) only leaves it
// unclaimed.
func (ss *Sessions) claim(ctx context.Context, issuer, id string) *SessionClaim {
	claim, ok, err := ClaimSession(ctx, ss.store, issuer, id)
	if err != nil || !ok {
		ss.log.WarnContext(ctx, "could not claim the new Session", "issuer", issuer, "err", err)
		return nil
	}
	return claim
}

// save records e's Session (never its token) so a restart resumes it,
// fenced by the claim on it when there is one: a process that lost the
// claim to another, which continues the Session, writes nothing. e.mu is
// held.
func (ss *Sessions) save(ctx context.Context, issuer string, e *companySession) error {
	info, w := e.sess.Info(), ss.store
	if e.claim != nil {
		w = e.claim.Store
	}
	err := w.PutSession(ctx, store.Session{
		Issuer: issuer, UserID: e.userID, ID: info.ID, Domain: e.domain,
		SignedIn: info.SignedIn, Scopes: slices.Clone(info.Scopes), ExpiresAt: info.ExpiresAt,
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("auth: lost the lease of the Session to another process, which continues it: %w", err)
	}
	return err
}

// Save records the Session's new state after a sign-in, sign-out or
// narrowing (never its token), if sess is still the Company's Session.
func (ss *Sessions) Save(ctx context.Context, issuer string, sess *Session) {
	e := ss.entry(issuer)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess != sess {
		return
	}
	if err := ss.save(ctx, issuer, e); err != nil {
		ss.log.WarnContext(ctx, "could not save the Session", "issuer", issuer, "err", err)
	}
}

// Close gives back this process's claims on the person's Sessions, so
// another process or replica can continue them at once. The Sessions stay
// saved; Open after Close resumes them.
func (ss *Sessions) Close() {
	ss.mu.Lock()
	entries := slices.Collect(maps.Values(ss.byIssuer))
	ss.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		e.release()
		e.mu.Unlock()
	}
}
