package store

// This file implements leases: named locks shared by every process (and,
// with a shared database, every replica) that opens the state, so work that
// must run once at a time, such as refreshing, rotating or revoking one
// Account Token (Poppy 0.1 §4.8, §4.9), runs once at a time. A lease is one
// row written in short single-statement transactions: no database lock is
// ever held while the holder does its work, which may be a network round
// trip. A lease expires, so a holder that crashed loses it and another takes
// over; a holder that needs longer renews it.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrLeaseHeld is matched (with errors.Is) by AcquireLease's error when
// another holder has the lease and it has not expired.
var ErrLeaseHeld = errors.New("store: the lease is held by another holder")

// ErrLeaseLost is matched by RenewLease's error when the holder no longer
// has the lease: it expired and another holder took it, or it was released.
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
	// ExpiresAt is when the lease ends unless renewed, by the Store's clock
	// (Options.Now).
	ExpiresAt time.Time
}

// leaseHeldError says who holds a lease until when.
type leaseHeldError struct {
	name  string
	until time.Time
}

func (e *leaseHeldError) Error() string {
	return fmt.Sprintf("store: the lease %q is held by another holder until %s", e.name, e.until.Format(time.RFC3339Nano))
}

func (e *leaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// AcquireLease gives holder the lease name for ttl from now, when nobody
// holds it, its lease has expired, or holder already holds it (which renews
// it). Otherwise it fails with an error matching ErrLeaseHeld, at once: the
// caller decides whether and how long to wait.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return Lease{}, errors.New("store: acquire lease: name, holder and a positive ttl are required")
	}
	now := s.now()
	l := Lease{Name: name, Holder: holder, ExpiresAt: now.Add(ttl)}
	// One statement: the row is taken over only when it is free, expired or
	// already this holder's, atomically in every process and in PostgreSQL.
	res, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?`,
		name, holder, unixNano(l.ExpiresAt), unixNano(now))
	if err != nil {
		return Lease{}, fmt.Errorf("store: acquire lease %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Lease{}, fmt.Errorf("store: acquire lease %q: %w", name, err)
	} else if n == 1 {
		return l, nil
	}
	cur, err := s.lease(ctx, name)
	if errors.Is(err, ErrNotFound) {
		cur.ExpiresAt = now // released since: free now, for the next try
	} else if err != nil {
		return Lease{}, err
	}
	return Lease{}, &leaseHeldError{name: name, until: cur.ExpiresAt}
}

// RenewLease extends a lease its holder still has to ttl from now. It fails
// with an error matching ErrLeaseLost when the lease expired and another
// holder took it, or it was released.
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return Lease{}, errors.New("store: renew lease: ttl must be positive")
	}
	now := s.now()
	next := Lease{Name: l.Name, Holder: l.Holder, ExpiresAt: now.Add(ttl)}
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET expires_at = ?
		WHERE name = ? AND holder = ? AND expires_at > ?`,
		unixNano(next.ExpiresAt), l.Name, l.Holder, unixNano(now))
	if err != nil {
		return Lease{}, fmt.Errorf("store: renew lease %q: %w", l.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Lease{}, fmt.Errorf("store: renew lease %q: %w", l.Name, err)
	} else if n != 1 {
		return Lease{}, fmt.Errorf("store: renew lease %q: %w", l.Name, ErrLeaseLost)
	}
	return next, nil
}

// ReleaseLease gives a lease up, so another holder can take it at once.
// Releasing a lease that expired, or that another holder took since, changes
// nothing and is not an error.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`,
		l.Name, l.Holder); err != nil {
		return fmt.Errorf("store: release lease %q: %w", l.Name, err)
	}
	return nil
}

// lease returns the row of the lease name, expired or not, or an error
// matching ErrNotFound.
func (s *Store) lease(ctx context.Context, name string) (Lease, error) {
	l := Lease{Name: name}
	var expires int64
	err := s.db.QueryRowContext(ctx, `SELECT holder, expires_at FROM leases WHERE name = ?`, name).
		Scan(&l.Holder, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, notFound("lease " + name)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("store: lease %q: %w", name, err)
	}
	l.ExpiresAt = fromUnixNano(expires)
	return l, nil
}
