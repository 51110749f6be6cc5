// This file keeps one Session (Poppy 0.1 §4.2) in use by one process at a
// time among those sharing a store, replicas of a hosted agent included.
// Session Tokens live only in memory, so two processes continuing one
// Session would each renew its token, and a Company that refuses a token
// once a newer one of the Session was used (§4.3: "Whenever the Personal
// Agent gets a new Session Token for a Session, it MUST use the new token
// from then on") would refuse each one's token in turn. A process claims a
// saved Session before continuing it, and starts a new one when another
// process has it: a User may have several Sessions, and a conversation is
// not tied to one (§7.2).

package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// SessionLeaseTTL is how long a process's claim on a Session lasts unless
// renewed (it is, every third, until released): a Session of a process
// that crashed can be continued by another this long after.
const SessionLeaseTTL = 30 * time.Second

// LeaseStore is what a lease needs of the store (*store.Store).
type LeaseStore interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error)
	KeepLease(ctx context.Context, l store.Lease, ttl time.Duration) (context.Context, func())
	ReleaseLease(ctx context.Context, l store.Lease) error
	// Fenced returns the view whose writes are done only while l is held.
	Fenced(l store.Lease) *store.Store
}

// SessionClaim is a process's claim on a Session (ClaimSession).
type SessionClaim struct {
	// Store is the view of the store fenced by the claim: the Session's
	// record is written through it, so a process that lost the claim
	// (paused past its expiry while another continued the Session) cannot
	// overwrite the record; its write fails with an error matching
	// store.ErrLeaseLost.
	Store *store.Store
	// Release stops renewing the claim and gives it back.
	Release func()
}

// ClaimSession claims the Session id at the Company issuer for this
// process, at once or not at all: ok is false while another process holds
// it. The claim is renewed until released.
func ClaimSession(ctx context.Context, st LeaseStore, issuer, id string) (claim *SessionClaim, ok bool, err error) {
	b := make([]byte, 16)
	rand.Read(b)
	l, err := st.AcquireLease(ctx, "session "+issuer+" "+id, base64.RawURLEncoding.EncodeToString(b), SessionLeaseTTL)
	if errors.Is(err, store.ErrLeaseHeld) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("auth: claim the Session: %w", err)
	}
	_, stop := st.KeepLease(context.WithoutCancel(ctx), l, SessionLeaseTTL)
	return &SessionClaim{Store: st.Fenced(l), Release: func() {
		stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = st.ReleaseLease(rctx, l) // a claim not given back expires
	}}, true, nil
}
