package store

// This file implements leases: named locks shared by every process (and,
// with PostgreSQL, every replica) that opens the state, so work that must
// run once at a time, such as refreshing, rotating or revoking one Account
// Token (Poppy 0.1 §4.8, §4.9), runs once at a time. A lease is one row
// written in short single-statement transactions: no database lock is ever
// held while the holder does its work, which may be a network round trip.
// A lease expires, so a holder that crashed loses it and another takes
// over; a holder that needs longer renews it. Expiry is judged by the
// database's clock in the same statement that takes the lease, so
// replicas whose clocks disagree still agree on who holds it. Leases are
// per local user (Store.ForUser): two people's leases of one name are two
// leases. Each lease carries a fencing token, so that the writes done under
// it can be refused once it is lost (fence.go).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// ErrLeaseHeld is matched (with errors.Is) by AcquireLease's error when
// another holder has the lease and it has not expired.
var ErrLeaseHeld = errors.New("store: the lease is held by another holder")

// ErrLeaseLost is matched by RenewLease's error when the holder no longer
// has the lease: it expired and another holder took it, or it was released;
// and by the error of a fenced write ([Store.Fenced]) or a CheckLease of a
// lease no longer held.
var ErrLeaseLost = errors.New("store: the lease is no longer held")

// Lease is a held lease: who holds which name until when.
type Lease struct {
	// Name is what the lease guards, chosen by its users (for example
	// "account-token ISSUER USER LABEL").
	Name string
	// Holder identifies the holder; only it can renew or release the lease.
	// Make it unique to one piece of work (a random ID), so two holders never
	// mistake one lease for their own.
	Holder string
	// ExpiresAt is when the lease ends unless renewed, by the database's
	// clock.
	ExpiresAt time.Time
	// Token is the lease's fencing token (fence.go): taken anew each time
	// a holder takes the lease from nobody or from another holder, greater
	// than every token given before in the state, and kept by renewals.
	// Writes through [Store.Fenced] are done only while it is current.
	Token int64

	// user is the local user of the view that took the lease.
	user string
}

// leaseHeldError says who holds a lease until when.
type leaseHeldError struct {
	name  string
	until time.Time
	// left is how long until the lease expires, by the database's clock.
	left time.Duration
}

func (e *leaseHeldError) Error() string {
	return fmt.Sprintf("store: the lease %q is held by another holder until %s", e.name, e.until.Format(time.RFC3339Nano))
}

func (e *leaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

func checkLease(what, name, holder string, ttl time.Duration) error {
	if name == "" || holder == "" || ttl <= 0 {
		return fmt.Errorf("store: %s lease: name, holder and a positive ttl are required", what)
	}
	return nil
}

// AcquireLease gives holder the lease name for ttl from now, when nobody
// holds it, its lease has expired, or holder already holds it (which renews
// it). Otherwise it fails with an error matching ErrLeaseHeld, at once: the
// caller decides whether and how long to wait, or calls WaitLease.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if err := checkLease("acquire", name, holder, ttl); err != nil {
		return Lease{}, err
	}
	// One statement: the row is taken over only when it is free, expired or
	// already this holder's, atomically in every process and replica; a new
	// holder gets a new fencing token in the same statement.
	l, err := s.takeLease(ctx, name, holder, ttl, `WHERE leases.holder = excluded.holder OR leases.expires_at <= NOW_NS`)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("store: acquire lease %q: %w", name, err)
	}
	held := &leaseHeldError{name: name}
	cur, left, err := s.lease(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound): // released since: free now, for the next try
	case err != nil:
		return Lease{}, err
	default:
		held.until, held.left = cur.ExpiresAt, left
	}
	return Lease{}, held
}

// WaitLease is AcquireLease that waits while another holder has the
// lease, until ctx ends: it tries again when the lease is released (a
// notification, see Notify), when it expires, and at the latest after a
// short interval (100 ms on SQLite, which hears another process's release
// only so; 2 s on PostgreSQL, in case a notification was lost), never in a
// busy loop.
func (s *Store) WaitLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if err := checkLease("wait for", name, holder, ttl); err != nil {
		return Lease{}, err
	}
	// Listening first, so a release between a try and the wait is heard.
	released, stop, err := s.notes.listen(ctx, leaseChannel)
	if err != nil {
		released, stop = nil, func() {} // no notifications now: look again at intervals
	}
	defer stop()
	key := leaseKey(s.user, name)
	for {
		l, err := s.AcquireLease(ctx, name, holder, ttl)
		var held *leaseHeldError
		if !errors.As(err, &held) {
			return l, err
		}
		if err := waitRelease(ctx, released, key, min(max(held.left, 0), s.leaseRecheck)); err != nil {
			return Lease{}, fmt.Errorf("store: wait for lease %q: %w", name, err)
		}
	}
}

// waitRelease waits up to d for the release of the lease with key, or
// until ctx ends.
func waitRelease(ctx context.Context, released <-chan string, key string, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case got, ok := <-released:
			if !ok {
				released = nil // the Store is closing: the next try says so
			}
			if got == key {
				return nil
			}
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RenewLease extends a lease its holder still has to ttl from now. It fails
// with an error matching ErrLeaseLost when the lease expired and another
// holder took it, or it was released.
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return Lease{}, errors.New("store: renew lease: ttl must be positive")
	}
	var expires int64
	err := s.conn().queryRow(ctx, s.d.now(`UPDATE leases SET expires_at = NOW_NS + ?
		WHERE local_user = ? AND name = ? AND holder = ? AND expires_at > NOW_NS
		RETURNING expires_at`), ttl.Nanoseconds(), s.user, l.Name, l.Holder).Scan(&expires)
	if errors.Is(err, sql.ErrNoRows) {
		s.held.change(s.metrics, leaseKey(s.user, l.Name)+"\x00"+l.Holder, false)
		return Lease{}, fmt.Errorf("store: renew lease %q: %w", l.Name, ErrLeaseLost)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("store: renew lease %q: %w", l.Name, err)
	}
	l.ExpiresAt = fromUnixNano(expires)
	return l, nil
}

// ReleaseLease gives a lease up, so another holder can take it at once;
// those waiting in WaitLease, in any process on PostgreSQL, hear of it.
// Releasing a lease that expired, or that another holder took since,
// changes nothing and is not an error.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	s.held.change(s.metrics, leaseKey(s.user, l.Name)+"\x00"+l.Holder, false) // held or not, it is not this process's any more
	res, err := s.conn().exec(ctx, `DELETE FROM leases WHERE local_user = ? AND name = ? AND holder = ?`,
		s.user, l.Name, l.Holder)
	if err != nil {
		return fmt.Errorf("store: release lease %q: %w", l.Name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		// At most once: a waiter that misses it looks again soon anyway.
		_ = s.notify(ctx, leaseChannel, leaseKey(s.user, l.Name))
	}
	return nil
}

// lease returns the row of the lease name, expired or not, with how long
// it has left by the database's clock, or an error matching ErrNotFound.
func (s *Store) lease(ctx context.Context, name string) (Lease, time.Duration, error) {
	l := Lease{Name: name}
	var expires, left int64
	err := s.conn().queryRow(ctx, s.d.now(`SELECT holder, expires_at, expires_at - NOW_NS FROM leases
		WHERE local_user = ? AND name = ?`), s.user, name).Scan(&l.Holder, &expires, &left)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, 0, notFound("lease " + name)
	}
	if err != nil {
		return Lease{}, 0, fmt.Errorf("store: lease %q: %w", name, err)
	}
	l.ExpiresAt = fromUnixNano(expires)
	return l, time.Duration(left), nil
}

// KeepLease renews l every third of ttl until stop is called or ctx ends,
// for work that lasts longer than one ttl; the context it returns ends
// then, or as soon as the lease is found lost (another holder took it
// after it expired), so the work stops before another holder's begins.
// A renewal that fails otherwise (the database briefly away) is tried
// again at the next one, while the lease may still be held. stop waits for
// the renewals to end; it does not release the lease.
func (s *Store) KeepLease(ctx context.Context, l Lease, ttl time.Duration) (held context.Context, stop func()) {
	held, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-t.C:
			}
			next, err := s.RenewLease(held, l, ttl)
			switch {
			case err == nil:
				l = next
			case errors.Is(err, ErrLeaseLost):
				return
			}
		}
	}()
	return held, func() {
		cancel()
		<-done
	}
}

// heldLeases are the leases this process holds, for the metrics: one per
// local user, name and holder. It is safe for concurrent use.
type heldLeases struct {
	// mu guards keys.
	mu   sync.Mutex
	keys map[string]struct{}
}

// change adds (held) or removes key, and tells m how many are held.
func (h *heldLeases) change(m *metrics.Recorder, key string, held bool) {
	if m == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = map[string]struct{}{}
	}
	if held {
		h.keys[key] = struct{}{}
	} else {
		delete(h.keys, key)
	}
	m.LeasesHeld(len(h.keys))
}
