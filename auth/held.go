// This file implements the Account Token the agent holds for each User at
// each Company (Poppy 0.1 §4.4, §4.8, §4.9), and the policy around it: how a
// Session opens (started or continued, signed in with the held token when
// there is one), when the held token stands in for a new sign-in (when it
// covers the task, confirmed by the Company), how a new sign-in's token
// replaces it (the old one revoked), and what the Company refused, which
// never counts again.

package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// ErrNoAccountToken is returned by SignInHeld and Narrow when the agent
// holds no Account Token for the User that covers the scopes: a new sign-in
// is needed (Poppy 0.1 §4.4).
var ErrNoAccountToken = errors.New("auth: no Account Token held covers the scopes; the User must sign in")

// Change is something that happened to a Session's sign-in by itself, which
// the User should hear of. Session.TakeChanges reports each once.
type Change string

const (
	// ChangeAccountRefused: the Company refused the Account Token held (it
	// expired, or the User disconnected the agent in the account settings,
	// Poppy 0.1 §4.9). It was dropped and the Session continues signed out.
	ChangeAccountRefused Change = "account_token_refused"
	// ChangeRestarted: the Session was signed in with no Account Token to
	// renew it with (the Company issued none, breaking §4.4, or refused the
	// one it still had the Session signed in with), so when its token was due
	// a new signed-out Session took its place (its ID changed).
	ChangeRestarted Change = "restarted_signed_out"
)

// holding is the Account Token held for one User at one Company. It is safe
// for concurrent use.
type holding struct {
	issuer, userID string
	st             AccountStore // nil: memory only

	// mu guards acct, gen and refused; it is held while the store is read,
	// so one load runs at a time.
	mu   sync.Mutex
	acct *Account
	// gen is the User's generation at the Company when acct was last
	// checked against the store (elsewhere.go).
	gen store.Generation
	// refused are the SHA-256 of the Account Tokens the Company refused, so a
	// copy still in the store (a delete that failed) is never taken up again.
	refused map[[32]byte]bool
}

// holding returns the holding of userID at the Company issuer.
func (a *Agent) holding(issuer, userID string) *holding {
	a.heldMu.Lock()
	defer a.heldMu.Unlock()
	key := issuer + " " + userID
	h := a.held[key]
	if h == nil {
		h = &holding{issuer: issuer, userID: userID, st: a.accounts, refused: map[[32]byte]bool{}}
		a.held[key] = h
	}
	return h
}

// get returns the Account Token held, or nil. When none is known, or the one
// known was dropped, it reads the store: another process sharing it may have
// signed in since. When another process signed the User out since (or
// forgot the Company), the one known is checked against the store first.
func (h *holding) get(ctx context.Context) (*Account, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.sync(ctx); err != nil {
		return nil, err
	}
	if h.acct != nil && !h.acct.Dropped() {
		return h.acct, nil
	}
	if h.acct != nil && h.acct.Refused() {
		h.refused[sha256.Sum256([]byte(h.acct.token().Reveal()))] = true
	}
	h.acct = nil
	if h.st == nil {
		return nil, nil
	}
	loaded, err := LoadAccount(ctx, h.st, h.issuer, h.userID, DefaultAccountLabel)
	if err != nil || loaded == nil {
		return nil, err
	}
	if h.refused[sha256.Sum256([]byte(loaded.token().Reveal()))] {
		loaded.drop(ctx, loaded.store(), true) // the Company refused it: never again
		return nil, nil
	}
	h.acct = loaded
	return loaded, nil
}

// sync checks the Account Token known against the store when the User's
// generation at the Company changed: one the store no longer keeps (signed
// out or forgotten elsewhere) is dropped. h.mu is held.
func (h *holding) sync(ctx context.Context) error {
	if h.st == nil {
		return nil
	}
	g, err := h.st.Generation(ctx, h.issuer)
	if err != nil {
		return fmt.Errorf("auth: read what other processes did at the Company: %w", err)
	}
	if g == h.gen {
		return nil
	}
	h.gen = g
	if h.acct == nil || h.acct.Dropped() {
		return nil
	}
	return h.acct.reload(ctx)
}

// replace makes next the Account Token held, kept in the store in place of
// the one held before, which no Session signs in with any more. It returns
// that one when it was still live, for the caller to revoke. The store is
// written under the lease, so no other process's rotation of the old token
// writes over the new one.
func (h *holding) replace(ctx context.Context, next *Account) (*Account, error) {
	h.mu.Lock()
	old := h.acct
	h.acct = next
	h.mu.Unlock()
	live := old != nil && old != next && !old.Dropped()
	if old != nil && old != next {
		old.retire() // before the lease, in the order refresh takes them
	}
	err := withLease(ctx, h.st, leaseName(h.issuer, h.userID, next.label), func(ctx context.Context, w AccountStore) error {
		return next.keep(ctx, h.st, w)
	})
	if !live {
		old = nil
	}
	return old, err
}

// Open opens a Session for the User userID at the Company, as what the agent
// holds allows (Poppy 0.1 §4.2, §4.8). It continues the Session resume (the
// ID of one an earlier run kept; "" for none) while the Company still has
// it, and otherwise starts a new one; either way signed in with the Account
// Token held for the User, if there is one. A Session that cannot be
// continued is replaced by a new one (compare Info().ID with resume). A held
// Account Token the Company refuses is dropped and the Session continues
// signed out; TakeChanges then reports ChangeAccountRefused.
func (a *Agent) Open(ctx context.Context, c Company, userID, resume string) (*Session, error) {
	acct, err := a.holding(c.Issuer, userID).get(ctx)
	if err != nil {
		return nil, err
	}
	if resume != "" {
		var s *Session
		if acct != nil {
			// Poppy 0.1 §4.2: "A signed-in Session is renewed with the Account Token instead (4.8)."
			s, err = a.ResumeSignedInSession(ctx, c, userID, resume, acct, nil)
		} else {
			s, err = a.ResumeSession(ctx, c, userID, resume)
		}
		if err == nil || errors.Is(err, ErrAccountTokenRefused) {
			return s, nil
		}
	}
	if acct == nil {
		return a.StartSession(ctx, c, userID)
	}
	// Poppy 0.1 §4.8: "Without one, it starts a new Session that is already signed in"
	s, err := a.StartSignedInSession(ctx, c, userID, acct, nil)
	if errors.Is(err, ErrAccountTokenRefused) {
		return s, nil // Poppy 0.1 §4.8: "The Session continues signed out"
	}
	return s, err
}

// Held returns the Account Token held for the Session's User at its
// Company, or nil when there is none. It reads the store when it knows of
// none: another process may have signed in.
func (s *Session) Held(ctx context.Context) (*Account, error) { return s.h.get(ctx) }

// SignInHeld signs the Session in with the Account Token held for its User
// when that token covers scopes, instead of a new sign-in (Poppy 0.1 §4.4:
// "Before starting a new sign-in, the Personal Agent SHOULD check whether it
// already holds an Account Token that covers the task (4.8)"). The Company
// confirms it: the Session is renewed with the token even when it seems
// signed in already, so a token it refused never counts (§4.9), and the
// scopes the Session narrowed to are kept when they cover scopes. It returns
// ErrNoAccountToken when no token held covers scopes, and
// ErrAccountTokenRefused when the Company refused the one held: a new
// sign-in is needed either way, and the Session continues signed out.
func (s *Session) SignInHeld(ctx context.Context, scopes []string) error {
	acct, err := s.Held(ctx)
	if err != nil {
		return err
	}
	info := s.Info()
	if acct == nil {
		if info.SignedIn && s.Account() == nil && covers(info.Scopes, scopes) {
			return nil // signed in without an Account Token: nothing to renew it with
		}
		return ErrNoAccountToken
	}
	if !acct.Covers(scopes, s.a.now()) {
		return ErrNoAccountToken
	}
	using, narrow := s.signedInWith()
	if using != acct || !covers(info.Scopes, scopes) {
		narrow = nil // all the token grants
	}
	if err := s.SignInWith(ctx, acct, narrow); err != nil {
		return err
	}
	if !covers(s.Info().Scopes, scopes) {
		return ErrNoAccountToken // the Company granted fewer than the token says
	}
	return nil
}

// signInAgain renews the Session with the Account Token it is signed in
// with, or else the one held for its User, keeping its scopes, after a
// sign_in_required. It returns the Account used, or nil when there is none;
// a refused one gives ErrAccountTokenRefused.
func (s *Session) signInAgain(ctx context.Context) (*Account, error) {
	acct, narrow := s.signedInWith()
	if acct == nil {
		held, err := s.Held(ctx)
		if err != nil || held == nil {
			return nil, err
		}
		acct = held
	}
	if err := s.SignInWith(ctx, acct, narrow); err != nil {
		return nil, err
	}
	return acct, nil
}

// refuse drops acct, which the Company refused though it renewed the
// Session with it: the Session, still signed in with it at the Company, is
// stranded, and is replaced by a new signed-out one now (Poppy 0.1 §4.9:
// "It then continues signed out").
func (s *Session) refuse(ctx context.Context, acct *Account) {
	acct.use.Lock()
	acct.drop(ctx, acct.store(), true)
	acct.use.Unlock()
	s.mu.Lock()
	if s.account == acct {
		s.account, s.narrow, s.stranded = nil, nil, true
	}
	s.mu.Unlock()
	s.note(ChangeAccountRefused)
	_ = s.Renew(ctx) // a failure here shows at the next request
}

// Narrow gives the signed-in Session a token for fewer scopes than the
// Account Token held grants, or for all of them again when scopes is empty
// (Poppy 0.1 §4.8: "scope MAY ask for fewer scopes than the Account Token
// has ... It can't ask for more."). It fails with ErrNoAccountToken when no
// Account Token is held, and with an error matching ErrInvalidScope, before
// asking the Company, when the one held does not grant all of scopes.
func (s *Session) Narrow(ctx context.Context, scopes []string) error {
	acct, err := s.Held(ctx)
	if err != nil {
		return err
	}
	if acct == nil {
		return ErrNoAccountToken
	}
	if !acct.Covers(scopes, s.a.now()) {
		return &Error{Code: ErrInvalidScope.Code, Description: "the Account Token held grants " +
			strings.Join(acct.Scopes(), " ") + ", not all of " + strings.Join(scopes, " ")}
	}
	if len(scopes) == 0 {
		scopes = nil
	}
	return s.SignInWith(ctx, acct, scopes)
}

// HoldError reports what failed when a finished sign-in's Account Token was
// made the one held. The new token is held either way, in memory at least.
type HoldError struct {
	// Keep is why the new Account Token could not be stored: later Sessions
	// of other processes, and of this one after a restart, start signed out.
	Keep error
	// Revoke is why the Account Token it replaced could not be revoked.
	Revoke error
}

// Error names what failed.
func (e *HoldError) Error() string {
	var parts []string
	if e.Keep != nil {
		parts = append(parts, "keeping the new Account Token: "+e.Keep.Error())
	}
	if e.Revoke != nil {
		parts = append(parts, "revoking the Account Token it replaced: "+e.Revoke.Error())
	}
	return "auth: " + strings.Join(parts, "; ")
}

// Unwrap returns the errors.
func (e *HoldError) Unwrap() []error { return slices.DeleteFunc([]error{e.Keep, e.Revoke}, isNil) }

func isNil(err error) bool { return err == nil }

// Hold makes the Account Token of a finished sign-in of the Session the one
// held for its User: stored, encrypted, in place of the one held before,
// which is then revoked (Poppy 0.1 §4.4: "The new Account Token replaces the
// old one, which the Personal Agent SHOULD revoke (4.9)"). A sign-in that
// issued no Account Token changes nothing. The error is a *HoldError.
func (s *Session) Hold(ctx context.Context, in *SignIn) error {
	if in == nil || in.Account == nil {
		return nil
	}
	if s.Gone(ctx) {
		// The User's state here was forgotten while the sign-in ran: keep
		// nothing for a User ID that is gone, and end the access it gave.
		return &HoldError{Keep: ErrForgotten, Revoke: s.a.Revoke(ctx, s.company, in.Account)}
	}
	old, kerr := s.h.replace(ctx, in.Account)
	var rerr error
	if old != nil {
		rerr = s.a.Revoke(ctx, s.company, old)
	}
	if kerr != nil || rerr != nil {
		return &HoldError{Keep: kerr, Revoke: rerr}
	}
	return nil
}

// note records a change for TakeChanges, once until taken.
func (s *Session) note(c Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.changes, c) {
		s.changes = append(s.changes, c)
	}
}

// TakeChanges returns what happened to the Session's sign-in by itself since
// the last call, for the agent to tell the User.
func (s *Session) TakeChanges() []Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.changes
	s.changes = nil
	return c
}

// covers reports whether have holds every scope of want.
func covers(have, want []string) bool {
	for _, sc := range want {
		if !slices.Contains(have, sc) {
			return false
		}
	}
	return true
}
