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

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestLease walks one lease through its life: taken, refused to another
// holder, renewed, taken over once expired, lost by the old holder, and
// released.
func TestLease(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{t: time.Date(2026, 10, 8, 19, 0, 0, 0, time.UTC)}
	s := openTest(t, t.TempDir(), &Options{Key: testKey, Now: clock.Now})
	const name = "account-token https://auth.example.com usr_1 default"

	a, err := s.AcquireLease(ctx, name, "holder-a", time.Minute)
	if err != nil || a.Holder != "holder-a" || !a.ExpiresAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("AcquireLease = %+v, %v", a, err)
	}
	if _, err := s.AcquireLease(ctx, name, "holder-b", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("AcquireLease by another holder: %v, want ErrLeaseHeld", err)
	}
	if again, err := s.AcquireLease(ctx, name, "holder-a", 2*time.Minute); err != nil ||
		!again.ExpiresAt.Equal(clock.Now().Add(2*time.Minute)) {
		t.Fatalf("AcquireLease by its holder = %+v, %v; want it renewed", again, err)
	}
	clock.Advance(90 * time.Second)
	if a, err = s.RenewLease(ctx, a, time.Minute); err != nil {
		t.Fatalf("RenewLease before expiry: %v", err)
	}
	clock.Advance(59 * time.Second)
	if _, err := s.AcquireLease(ctx, name, "holder-b", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("AcquireLease a second before expiry: %v, want ErrLeaseHeld", err)
	}

	// The holder crashed: once the lease expires, another takes over.
	clock.Advance(time.Second)
	b, err := s.AcquireLease(ctx, name, "holder-b", time.Minute)
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
	if err := s.ReleaseLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, name, "holder-c", time.Minute); err != nil {
		t.Fatalf("AcquireLease after release: %v", err)
	}
	if _, err := s.AcquireLease(ctx, "", "holder-c", time.Minute); err == nil {
		t.Error("AcquireLease with no name succeeded")
	}
}

// TestLeaseAcrossStores: two Stores on one database file (as two poppy-mcp
// processes have) take turns under one lease. Each turn reads a counter,
// writes it back plus one, then releases; a lost update would show as a
// count below the number of turns.
func TestLeaseAcrossStores(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stores := []*Store{openTest(t, dir, nil), openTest(t, dir, nil)}
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
	var l Lease
	for {
		var err error
		l, err = s.AcquireLease(ctx, name, holder, time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLeaseHeld) {
			return err
		}
		time.Sleep(time.Millisecond)
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
