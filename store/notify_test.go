package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// receive returns the next payload on ch, failing the test if none comes
// within a generous bound (a hang guard, not a timing assertion).
func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("the listener's channel closed")
		}
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("no notification")
	}
	return ""
}

func TestNotify(t *testing.T) { forEachBackend(t, testNotify) }

// testNotify: a notification reaches every listener of its channel on the
// Store and its views, in order, and nothing of another channel; a
// listener whose context ends has its channel closed.
func testNotify(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	lctx, cancel := context.WithCancel(ctx)
	one, err := s.Listen(lctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	two, err := s.ForUser("alice").Listen(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Listen(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"first", "second", ""} {
		if err := s.ForUser("bob").Notify(ctx, "work", p); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range []<-chan string{one, two} {
		for _, want := range []string{"first", "second", ""} {
			if got := receive(t, ch); got != want {
				t.Errorf("payload %q, want %q", got, want)
			}
		}
	}
	select {
	case p := <-other:
		t.Errorf("a notification on work reached other: %q", p)
	default:
	}
	cancel()
	for range one {
	} // closed once its context ends
}

func TestNotifyRefusesBadInput(t *testing.T) { forEachBackend(t, testNotifyRefusesBadInput) }

func testNotifyRefusesBadInput(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	for _, ch := range []string{"", "Work", "9lives", "_lease", "a-b", strings.Repeat("a", 33)} {
		if err := s.Notify(ctx, ch, "x"); err == nil {
			t.Errorf("Notify on channel %q succeeded", ch)
		}
		if _, err := s.Listen(ctx, ch); err == nil {
			t.Errorf("Listen on channel %q succeeded", ch)
		}
	}
	for _, p := range []string{strings.Repeat("x", MaxNotifyPayload+1), "a\x00b", "\xff"} {
		if err := s.Notify(ctx, "work", p); err == nil {
			t.Errorf("Notify of a %d-byte bad payload succeeded", len(p))
		}
	}
	if err := s.Notify(ctx, "work", strings.Repeat("é", MaxNotifyPayload/2)); err != nil {
		t.Errorf("Notify of the largest payload: %v", err)
	}
}

// TestNotifyAcrossReplicas: on PostgreSQL a notification from one replica
// reaches the listeners of another; on SQLite notifications stay in their
// Store, as documented.
func TestNotifyAcrossReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		where := b.fresh(t)
		a, other := b.openAt(t, where, nil), b.openAt(t, where, nil)
		ch, err := a.Listen(ctx, "work")
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Notify(ctx, "work", "from the other replica"); err != nil {
			t.Fatal(err)
		}
		if err := a.Notify(ctx, "work", "from this one"); err != nil {
			t.Fatal(err)
		}
		got := receive(t, ch)
		if b == postgresBackend {
			if got != "from the other replica" {
				t.Errorf("first payload %q, want the other replica's", got)
			}
			got = receive(t, ch)
		}
		if got != "from this one" {
			t.Errorf("payload %q, want this replica's", got)
		}
	})
}

// TestNotifyStateNamespaces: two states in one PostgreSQL database (two
// schemas) do not hear each other's notifications.
func TestNotifyStateNamespaces(t *testing.T) {
	postgresDSN(t)
	ctx := context.Background()
	a, b := postgresBackend.openNew(t, nil), postgresBackend.openNew(t, nil)
	ch, err := a.Listen(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Notify(ctx, "work", "other state"); err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, "work", "this state"); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ch); got != "this state" {
		t.Errorf("payload %q from another state", got)
	}
}

// TestListenReconnects: when the listening connection dies (the server
// restarted, a proxy cut it), the Store connects again and listens again,
// so later notifications arrive.
func TestListenReconnects(t *testing.T) {
	postgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := postgresBackend.openNew(t, nil)
	ch, err := s.Listen(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	pid := s.notes.pg.backendPID()
	if _, err := adminDB(t).Exec(`SELECT pg_terminate_backend($1)`, int64(pid)); err != nil {
		t.Fatal(err)
	}
	// Notifications sent while it reconnects are lost (at most once):
	// send until one arrives.
	for i := 0; ; i++ {
		if err := s.Notify(ctx, "work", "after"); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-ch:
			if p != "after" {
				t.Fatalf("payload %q", p)
			}
			if now := s.notes.pg.backendPID(); now == pid || now == 0 {
				t.Errorf("backend %d after reconnecting, was %d", now, pid)
			}
			t.Logf("delivered after %d notifications", i+1)
			return
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no notification after the connection was cut")
		}
	}
}

func TestListenAfterClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := b.openNew(t, nil)
		ch, err := s.Listen(context.Background(), "work")
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		for range ch {
		} // closed by Close
		if _, err := s.Listen(context.Background(), "work"); !errors.Is(err, ErrStoreClosed) {
			t.Errorf("Listen after Close: %v, want ErrStoreClosed", err)
		}
	})
}

func TestWaitLeaseWakesOnRelease(t *testing.T) { forEachBackend(t, testWaitLeaseWakesOnRelease) }

// testWaitLeaseWakesOnRelease: a waiter gets a lease as soon as its holder
// releases it, by the release's notification: its look-again interval is
// an hour and the lease had an hour left, so nothing else could wake it.
// On PostgreSQL the holder is another replica.
func testWaitLeaseWakesOnRelease(t *testing.T, b *backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	where := b.fresh(t)
	waiter := b.openAt(t, where, nil).ForUser("alice")
	waiter.leaseRecheck = time.Hour
	holderStore := waiter
	if b == postgresBackend {
		holderStore = b.openAt(t, where, nil).ForUser("alice")
	}
	l, err := holderStore.AcquireLease(ctx, "job", "holder", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := waiter.WaitLease(ctx, "job", "waiter", time.Minute)
		got <- err
	}()
	// Another person's lease of the same name being released wakes nobody.
	other, err := holderStore.ForUser("bob").AcquireLease(ctx, "job", "bob", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := holderStore.ForUser("bob").ReleaseLease(ctx, other); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("WaitLease returned while the lease was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := holderStore.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("WaitLease: %v", err)
	}
}

func TestWaitLeaseTakesOverExpired(t *testing.T) { forEachBackend(t, testWaitLeaseTakesOverExpired) }

// testWaitLeaseTakesOverExpired: a holder that crashed never releases; the
// waiter takes the lease when it expires.
func testWaitLeaseTakesOverExpired(t *testing.T, b *backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	where := b.fresh(t)
	crashed, waiter := b.openAt(t, where, nil), b.openAt(t, where, nil)
	if _, err := crashed.AcquireLease(ctx, "job", "crashed", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	l, err := waiter.WaitLease(ctx, "job", "waiter", time.Minute)
	if err != nil || l.Holder != "waiter" {
		t.Fatalf("WaitLease = %+v, %v", l, err)
	}
	// A context that ends first ends the wait.
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := crashed.WaitLease(short, "job", "crashed", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitLease past its context: %v, want DeadlineExceeded", err)
	}
}
