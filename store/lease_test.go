package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// expireLease moves the lease name of user into the past, as the passing of
// its ttl would: the database's clock is not the tests' to move.
func expireLease(t *testing.T, b *backend, where, user, name string) {
	t.Helper()
	b.exec(t, b.raw(t, where), `UPDATE leases SET expires_at = expires_at - ? WHERE local_user = ? AND name = ?`,
		int64(24*time.Hour), user, name)
}

func TestLease(t *testing.T) { forEachBackend(t, testLease) }

// testLease walks one lease through its life: taken, refused to another
// holder, renewed, taken over once expired, lost by the old holder, and
// released.
func testLease(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	const name = "account-token https://auth.example.com usr_1 default"

	before := time.Now()
	a, err := s.AcquireLease(ctx, name, "holder-a", time.Minute)
	if err != nil || a.Holder != "holder-a" || a.ExpiresAt.Before(before.Add(time.Minute-5*time.Second)) {
		t.Fatalf("AcquireLease = %+v, %v", a, err)
	}
	_, err = s.AcquireLease(ctx, name, "holder-b", time.Minute)
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("AcquireLease by another holder: %v, want ErrLeaseHeld", err)
	}
	if again, err := s.AcquireLease(ctx, name, "holder-a", time.Hour); err != nil ||
		!again.ExpiresAt.After(a.ExpiresAt) {
		t.Fatalf("AcquireLease by its holder = %+v, %v; want it renewed", again, err)
	}
	if a, err = s.RenewLease(ctx, a, time.Minute); err != nil {
		t.Fatalf("RenewLease before expiry: %v", err)
	}

	// The holder crashed: once the lease expires, another takes over.
	expireLease(t, b, where, "", name)
	if _, err := s.RenewLease(ctx, a, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("RenewLease of an expired lease: %v, want ErrLeaseLost", err)
	}
	bl, err := s.AcquireLease(ctx, name, "holder-b", time.Minute)
	if err != nil {
		t.Fatalf("AcquireLease of an expired lease: %v", err)
	}
	if _, err := s.RenewLease(ctx, a, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("RenewLease by the old holder: %v, want ErrLeaseLost", err)
	}
	if err := s.ReleaseLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, name, "holder-c", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("the old holder's release freed the new holder's lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, bl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, name, "holder-c", time.Minute); err != nil {
		t.Fatalf("AcquireLease after release: %v", err)
	}
	if _, err := s.AcquireLease(ctx, "", "holder-c", time.Minute); err == nil {
		t.Error("AcquireLease with no name succeeded")
	}
}

func TestLeaseByDatabaseClock(t *testing.T) { forEachBackend(t, testLeaseByDatabaseClock) }

// testLeaseByDatabaseClock: two replicas whose clocks are two hours apart
// (Options.Now) still agree on a lease, because the database's clock
// judges it. Were a replica's own clock used, the one ahead would take the
// lease over at once, and the one behind would hold it two hours too long.
func testLeaseByDatabaseClock(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	ahead := b.openAt(t, where, &Options{Key: testKey, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	behind := b.openAt(t, where, &Options{Key: testKey, Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	l, err := behind.AcquireLease(ctx, "job", "behind", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ahead.AcquireLease(ctx, "job", "ahead", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("the replica an hour ahead took a lease with a minute left: %v", err)
	}
	if d := time.Until(l.ExpiresAt); d < 30*time.Second || d > 2*time.Minute {
		t.Errorf("ExpiresAt is %v from now, want about a minute by the database's clock", d)
	}
	expireLease(t, b, where, "", "job")
	if _, err := ahead.AcquireLease(ctx, "job", "ahead", time.Minute); err != nil {
		t.Fatalf("the expired lease was not taken over: %v", err)
	}
	if _, err := behind.RenewLease(ctx, l, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("RenewLease by the replica behind: %v, want ErrLeaseLost", err)
	}
}

func TestLeaseAcrossStores(t *testing.T) { forEachBackend(t, testLeaseAcrossStores) }

// testLeaseAcrossStores: two Stores on one state (as two poppy-mcp processes
// or two replicas have) take turns under one lease. Each turn reads a
// counter, writes it back plus one, then releases; a lost update would show
// as a count below the number of turns.
func testLeaseAcrossStores(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	stores := []*Store{b.openAt(t, where, nil), b.openAt(t, where, nil)}
	const name, turns = "counter", 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(stores)*turns)
	for i, s := range stores {
		for g := range 2 {
			wg.Go(func() {
				for n := range turns {
					holder := fmt.Sprintf("store-%d/%d/%d", i, g, n)
					if err := leaseTurn(ctx, s, name, holder); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := stores[0].Secret(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(v), strconv.Itoa(2*len(stores)*turns); got != want {
		t.Errorf("counter = %s, want %s: two holders had the lease at once", got, want)
	}
}

// leaseTurn waits for the lease, adds one to the counter kept under name,
// and releases the lease.
func leaseTurn(ctx context.Context, s *Store, name, holder string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := s.WaitLease(ctx, name, holder, time.Minute)
	if err != nil {
		return err
	}
	n := 0
	if v, err := s.Secret(ctx, name); err == nil {
		n, _ = strconv.Atoi(string(v))
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	time.Sleep(time.Millisecond) // a window for another holder to slip in, were the lease not held
	if err := s.PutSecret(ctx, name, []byte(strconv.Itoa(n+1))); err != nil {
		return err
	}
	return s.ReleaseLease(ctx, l)
}

func TestKeepLease(t *testing.T) { forEachBackend(t, testKeepLease) }

// testKeepLease: a kept lease outlives many of its ttls; its context ends
// once another holder took it after an expiry (the renewal finds it lost),
// and stop ends it too.
func testKeepLease(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	const name, ttl = "device-signin https://auth.example.com d1", 300 * time.Millisecond
	l, err := s.AcquireLease(ctx, name, "poller-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	held, stop := s.KeepLease(ctx, l, ttl)
	defer stop()
	// Several ttls later (waiting on the database's clock, which renewals
	// move), the lease is still poller-a's.
	var lease Lease
	deadline := time.Now().Add(20 * time.Second)
	for start := time.Now(); time.Since(start) < 4*ttl; time.Sleep(ttl / 4) {
		if _, err := s.AcquireLease(ctx, name, "poller-b", ttl); !errors.Is(err, ErrLeaseHeld) {
			t.Fatalf("the kept lease was taken: %v", err)
		}
	}
	if held.Err() != nil {
		t.Fatal("the kept lease's context ended while it was held")
	}
	expireLease(t, b, where, "", name)
	if lease, err = s.AcquireLease(ctx, name, "poller-b", time.Minute); err != nil {
		t.Fatalf("taking the expired lease: %v", err)
	}
	select {
	case <-held.Done():
	case <-time.After(time.Until(deadline)):
		t.Fatal("the context of a lost lease did not end")
	}
	if cur, _, err := s.lease(ctx, name); err != nil || cur.Holder != lease.Holder {
		t.Errorf("after the loss the lease is %+v, %v; want poller-b's", cur, err)
	}
	l2, err := s.AcquireLease(ctx, "other", "poller-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	held2, stop2 := s.KeepLease(ctx, l2, ttl)
	stop2()
	if held2.Err() == nil {
		t.Error("stop left the context going")
	}
}
