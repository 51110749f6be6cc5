package auth

// This file keeps one person's sign-ins (Poppy 0.1 §4.4-4.9): the latest
// at each Company, under way or finished, and how one ends (the new
// Account Token held in place of the old one, which is revoked). Device
// sign-ins are kept in the store (deviceflow.go), so that several replicas
// sharing it act as one: a sign-in started through one replica is read and
// finished through any other, one replica polls it at a time under a
// lease, and another takes over within seconds when that one dies.

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// SignInsOptions configure SignIns. The zero value of each field is
// documented.
type SignInsOptions struct {
	// Go runs device polling in the background of the person until they
	// are forgotten or the server closes; it reports false, without
	// running f, once closing has begun. Nil: go f(context.Background()).
	Go func(f func(ctx context.Context)) bool
	// Open returns the person's Session with the Company through domain,
	// starting one when needed: to adopt a sign-in another replica
	// finished, or to poll one taken over. Nil: neither is done.
	Open func(ctx context.Context, domain string) (*Session, error)
	// Detach returns a context for polling that outlives the request of
	// ctx and keeps what its log lines need. Nil: context.WithoutCancel.
	Detach func(ctx context.Context) context.Context
	// Owner is kept with each device sign-in (DeviceFlow.Owner): the
	// caller's note of whom it is for. Empty: none.
	Owner string
	// SigningIn runs as the polling of a device sign-in starts, and the
	// function it returns as it stops (metrics). Nil: nothing.
	SigningIn func() (done func())
	// Logger receives the sign-ins' operational logs. Nil discards them.
	Logger *slog.Logger
	// Now is the clock of the sign-ins' expiry. Nil: time.Now.
	Now func() time.Time
}

// SignIns is one person's latest sign-in at each Company, by issuer: one
// person's sign-in never replaces, or answers for, another's. It is safe
// for concurrent use.
type SignIns struct {
	sessions *Sessions    // the person's Sessions; nil without an identity
	store    *store.Store // the person's view; nil: sign-ins are this process's alone
	o        SignInsOptions

	// mu guards byIssuer. It is never held during I/O.
	mu       sync.Mutex
	byIssuer flowsByIssuer
	// keeping orders this process's writes of a kept page sign-in (Direct,
	// Mediated: signins_page.go), which hold no lease: a page's start and
	// its outcome are each a read then a write, and an older sign-in's
	// outcome must not overwrite a newer one's start. It is held during
	// the store's I/O, never the Company's.
	keeping sync.Mutex
}

// flowsByIssuer are a person's latest sign-ins, by issuer.
type flowsByIssuer map[string]*Flow

// NewSignIns returns the sign-ins of the person whose Sessions and view
// of the store sessions and st are.
func NewSignIns(sessions *Sessions, st *store.Store, opts *SignInsOptions) *SignIns {
	s := &SignIns{sessions: sessions, store: st, byIssuer: flowsByIssuer{}}
	if opts != nil {
		s.o = *opts
	}
	if s.o.Go == nil {
		s.o.Go = func(f func(context.Context)) bool { go f(context.Background()); return true }
	}
	if s.o.Detach == nil {
		s.o.Detach = context.WithoutCancel
	}
	if s.o.Logger == nil {
		s.o.Logger = slog.New(slog.DiscardHandler)
	}
	if s.o.Now == nil {
		s.o.Now = time.Now
	}
	if s.o.SigningIn == nil {
		s.o.SigningIn = func() func() { return func() {} }
	}
	return s
}

// Current returns the latest sign-in at the Company issuer, as this
// process knows it, or nil.
func (s *SignIns) Current(issuer string) *Flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byIssuer[issuer]
}

// All returns the latest sign-in at every Company.
func (s *SignIns) All() []*Flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.byIssuer))
}

// Replace makes f the latest sign-in at the Company issuer; one still
// pending is stopped first. The same sign-in pictured anew (taken over
// from another replica) is not a newer one: its waiters read the new
// picture.
func (s *SignIns) Replace(issuer string, f *Flow) {
	s.mu.Lock()
	old := s.byIssuer[issuer]
	s.byIssuer[issuer] = f
	s.mu.Unlock()
	if old != nil && old.ID != f.ID {
		old.Stop("replaced by a newer sign-in")
	}
}

// Cancel ends the sign-in pending at the Company issuer, if any, as
// failed with detail for the model, and stops its polling or page; it
// reports whether one was pending.
func (s *SignIns) Cancel(issuer, detail string) bool {
	f := s.Current(issuer)
	return f != nil && f.Stop(detail)
}

// Pending reports whether a sign-in of the person waits on the user.
func (s *SignIns) Pending() bool {
	for _, f := range s.All() {
		if f.Pending() {
			return true
		}
	}
	return false
}

// Close stops the sign-ins under way and forgets them: the person is
// being forgotten, or the server closes. A kept device sign-in stays
// pending in the store for another replica, or this one, to take over.
func (s *SignIns) Close() {
	s.mu.Lock()
	flows := slices.Collect(maps.Values(s.byIssuer))
	s.byIssuer = flowsByIssuer{}
	s.mu.Unlock()
	for _, f := range flows {
		f.Stop("The sign-in was stopped (poppy-mcp is shutting down).")
	}
}

// Finish ends f, a sign-in at the Company issuer with sess, with its
// outcome: on success the new Account Token is held in place of the old
// one, which is revoked (Poppy 0.1 §4.4: "The new Account Token replaces
// the old one, which the Personal Agent SHOULD revoke (4.9)"), and the
// Session saved signed in. A failed sign-in leaves the tokens held as they
// were (§4.4: "A pending or failed sign-in leaves existing tokens
// unchanged").
func (s *SignIns) Finish(ctx context.Context, issuer string, sess *Session, f *Flow, in *SignIn, err error) {
	defer s.keepPageOutcome(ctx, issuer, f) // the replica that started a page sign-in hears how it ended
	if err != nil {
		status, detail := FlowFailure(err)
		if f.End(status, nil, nil, detail) {
			s.o.Logger.InfoContext(ctx, "sign-in ended", "type", f.Kind, "issuer", issuer, "status", status, "err", err)
		}
		return
	}
	detail := s.hold(ctx, issuer, sess, in)
	s.sessions.Save(ctx, issuer, sess)
	// Logged before the flow ends, so whoever reads it complete finds the lines.
	s.o.Logger.InfoContext(ctx, "signed in", "type", f.Kind, "issuer", issuer, "scopes", strings.Join(in.Scopes, " "))
	if extra := NotRequested(in.Scopes, f.Scopes); len(extra) > 0 {
		// Poppy 0.1 §4.4: "The Company MUST NOT grant scopes beyond those requested and allowed for the type used."
		s.o.Logger.WarnContext(ctx, "the Company granted scopes that were not requested", "issuer", issuer,
			"requested", strings.Join(f.Scopes, " "), "not_requested", strings.Join(extra, " "))
	}
	f.End(FlowComplete, in.Scopes, in.Missing, detail)
}

// hold holds the Account Token of a sign-in (Session.Hold) and returns
// what the model should hear if it could not be kept.
func (s *SignIns) hold(ctx context.Context, issuer string, sess *Session, in *SignIn) (detail string) {
	var held *HoldError
	if !errors.As(sess.Hold(ctx, in), &held) {
		return ""
	}
	if held.Keep != nil {
		s.o.Logger.ErrorContext(ctx, "could not keep the Account Token", "issuer", issuer, "err", held.Keep)
		detail = "poppy-mcp could not store the Account Token, so later Sessions will start signed out."
	}
	if held.Revoke != nil {
		s.o.Logger.WarnContext(ctx, "could not revoke the replaced Account Token", "issuer", issuer, "err", held.Revoke)
	}
	return detail
}

// NotRequested returns the scopes of granted that requested lacks.
func NotRequested(granted, requested []string) []string {
	var out []string
	for _, sc := range granted {
		if !slices.Contains(requested, sc) {
			out = append(out, sc)
		}
	}
	return out
}
