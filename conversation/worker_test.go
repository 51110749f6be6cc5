package conversation

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// workerRun is a Worker running on a store until the test ends.
type workerRun struct {
	opens atomic.Int32 // calls of Open
	// refuse, while above zero, makes Open fail (no Session) and counts down.
	refuse atomic.Int32
}

// runWorker runs a Worker on st whose Open gives Trackers of co's User
// through a Client that never retries, so each round sends each message
// once; opts are the Trackers' options. It stops when the test ends, and
// the test waits for it.
func (co *company) runWorker(t *testing.T, st *store.Store, opts *TrackerOptions) *workerRun {
	t.Helper()
	return co.runWorkerWith(t, st, opts, nil)
}

// runWorkerWith is runWorker with the Worker's options but Open (nil:
// the defaults).
func (co *company) runWorkerWith(t *testing.T, st *store.Store, opts *TrackerOptions, wopts *WorkerOptions) *workerRun {
	t.Helper()
	run := &workerRun{}
	open := func(ctx context.Context, key, person string, owner Owner) (*Tracker, func(), error) {
		run.opens.Add(1)
		if run.refuse.Add(-1) >= 0 {
			return nil, nil, errors.New("no Session now")
		}
		if key != "" || person != "" || owner != co.owner() {
			t.Errorf("Open for %q, %q, %+v: not the test's person", key, person, owner)
		}
		c, err := New(co.sess.Client(), co.endpoint(), &Options{NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }})
		if err != nil {
			return nil, nil, err
		}
		tr, err := NewTracker(c, st, owner, opts)
		return tr, func() {}, err
	}
	var o WorkerOptions
	if wopts != nil {
		o = *wopts
	}
	o.Open = open
	w, err := NewWorker(st, &o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return run
}

// leftDown starts a conversation with "Hello", makes the Company
// unavailable for the next n message POSTs, and leaves text pending in it:
// its send, by a Tracker that then dies, meets the first of them.
func leftDown(t *testing.T, co *company, n int, text string) *Update {
	t.Helper()
	u := started(t, co.tracker(t), "Hello")
	co.srv.UnavailableNextPosts(n)
	var ue *UndeliveredError
	if _, err := co.dyingTracker(t, nil).Send(context.Background(), u.ConversationID, textMsg(text), nil); !errors.As(err, &ue) {
		t.Fatalf("the send to an unavailable Company: %v, want *UndeliveredError", err)
	}
	return u
}

// within waits on the bubble's clock, a second at a time, until done
// reports true or limit has passed; it reports whether done did.
func within(limit time.Duration, done func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(time.Second) {
		if done() {
			return true
		}
	}
	return done()
}

// TestWorkerDeliversAfterFailures: a message left pending while the
// Company is down is sent again by the Worker, with backoff, until the
// Company takes it, with no further call from the person: the Company has
// it exactly once, after one POST per injected failure and one more; the
// person's next call reports it delivered, once. On the old code it stayed
// pending until the person called again.
func TestWorkerDeliversAfterFailures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		const failures = 5
		u := leftDown(t, co, failures, "Yes, the medium one")
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		co.runWorker(t, co.st, nil)
		if !within(5*time.Minute, func() bool { return len(co.texts(u.ConversationID)) == 2 }) {
			t.Fatalf("the Company has %q after 5 minutes", co.texts(u.ConversationID))
		}
		time.Sleep(5 * time.Minute) // the Worker would send it again now if it were to
		if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello", "Yes, the medium one"}) {
			t.Errorf("the Company recorded %q, want the message once", got)
		}
		if n := co.srv.Count("api."+co.srv.Domain(), path); n != failures+1 {
			t.Errorf("%d POSTs of the message, want %d: one per failure, then the one that got through", n, failures+1)
		}
		msgID := co.srv.Messages(u.ConversationID)[1].ID
		r, err := co.tracker(t).Read(context.Background(), u.ConversationID, nil)
		if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentDelivered || r.Resent[0].MessageID != msgID ||
			r.Resent[0].Text != "Yes, the medium one" || r.Resent[0].ConversationID != u.ConversationID {
			t.Fatalf("the person's next call: %+v, %v; want the message reported delivered", r, err)
		}
		if again, err := co.tracker(t).Read(context.Background(), u.ConversationID, nil); err != nil || len(again.Resent) != 0 {
			t.Errorf("reported twice: %+v, %v", again, err)
		}
	})
}

// TestWorkerAnswerLost: a message the Company accepted but whose answer
// was lost, then met an unavailable Company on every retry, is sent again
// by the Worker with its ID once the Company is back: the Company
// recognizes it and keeps it once.
func TestWorkerAnswerLost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		u := started(t, co.tracker(t), "Hello")
		co.srv.DropConnectionAfterAccept(1)
		if _, err := co.dyingTracker(t, nil).Send(context.Background(), u.ConversationID, textMsg("Cancel order 1042"), nil); err == nil {
			t.Fatal("the send whose answer was lost succeeded")
		}
		co.srv.UnavailableNextPosts(3)
		co.runWorker(t, co.st, nil)
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		if !within(5*time.Minute, func() bool { return co.srv.Count("api."+co.srv.Domain(), path) == 5 }) {
			t.Fatalf("%d POSTs, want the first, 3 refused and the one recognized", co.srv.Count("api."+co.srv.Domain(), path))
		}
		time.Sleep(5 * time.Minute)
		if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello", "Cancel order 1042"}) {
			t.Errorf("the Company recorded %q, want the message once", got)
		}
		r, err := co.tracker(t).Read(context.Background(), u.ConversationID, nil)
		if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentDelivered {
			t.Errorf("the person's next call: %+v, %v", r, err)
		}
	})
}

// TestWorkerExpired: a message the Worker could not deliver while it was
// young is given up at PendingMaxAge, never sent after it, and reported
// expired to the person's next call.
func TestWorkerExpired(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		u := leftDown(t, co, 1000, "Yes, pay")
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		co.runWorker(t, co.st, &TrackerOptions{PendingMaxAge: 2 * time.Minute})
		time.Sleep(3 * time.Minute)
		posts := co.srv.Count("api."+co.srv.Domain(), path)
		if posts < 3 {
			t.Errorf("%d POSTs in 2 minutes: the Worker did not retry", posts)
		}
		time.Sleep(10 * time.Minute)
		if n := co.srv.Count("api."+co.srv.Domain(), path); n != posts {
			t.Errorf("%d more POSTs after the message expired", n-posts)
		}
		co.srv.UnavailableNextPosts(0)
		r, err := co.trackerWith(t, &TrackerOptions{PendingMaxAge: 2 * time.Minute}).Read(context.Background(), u.ConversationID, nil)
		if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentExpired || r.Resent[0].Text != "Yes, pay" {
			t.Fatalf("the person's next call: %+v, %v; want the message reported expired", r, err)
		}
		if slices.Contains(co.texts(u.ConversationID), "Yes, pay") {
			t.Error("the expired message reached the Company")
		}
	})
}

// TestWorkerRefused: a message the Company refuses for good when the
// Worker sends it again (a 4xx: the conversation was closed meanwhile) is
// sent once, not again, and reported refused with the Company's code.
func TestWorkerRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		u := leftDown(t, co, 1, "And a scarf")
		if err := co.srv.CloseConversation(u.ConversationID); err != nil {
			t.Fatal(err)
		}
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		co.runWorker(t, co.st, nil)
		time.Sleep(5 * time.Minute)
		if n := co.srv.Count("api."+co.srv.Domain(), path); n != 2 {
			t.Errorf("%d POSTs, want the failed one and one refused", n)
		}
		r, err := co.tracker(t).Read(context.Background(), u.ConversationID, nil)
		if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentRefused || !errors.Is(r.Resent[0].Err, ErrConversationClosed) {
			t.Fatalf("the person's next call: %+v, %v; want the message refused with conversation_closed", r, err)
		}
	})
}

// TestWorkerNoSession: while no Session can be opened for the person the
// Worker backs off and tries again, and sends the message once one can.
func TestWorkerNoSession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		u := leftDown(t, co, 1, "Medium")
		run := co.runWorker(t, co.st, nil)
		run.refuse.Store(3)
		if !within(5*time.Minute, func() bool { return len(co.texts(u.ConversationID)) == 2 }) {
			t.Fatalf("not delivered: the Company has %q", co.texts(u.ConversationID))
		}
		if n := run.opens.Load(); n != 4 {
			t.Errorf("Open called %d times, want 3 refused and 1", n)
		}
	})
}

// TestWorkersCompete: two Workers on one store, as two replicas share a
// database, send a pending message once between them: one of them works on
// the person's messages, under its lease, through every back-off, and the
// Company has the message once, after exactly one POST per failure and one
// more.
func TestWorkersCompete(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		u := leftDown(t, co, 4, "Two sizes up")
		a, b := co.runWorker(t, co.st, nil), co.runWorker(t, co.st, nil)
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		if !within(5*time.Minute, func() bool { return len(co.texts(u.ConversationID)) == 2 }) {
			t.Fatalf("not delivered: the Company has %q", co.texts(u.ConversationID))
		}
		time.Sleep(5 * time.Minute)
		if n := co.srv.Count("api."+co.srv.Domain(), path); n != 5 {
			t.Errorf("%d POSTs, want 5: the two Workers sent at once", n)
		}
		if got := co.texts(u.ConversationID); len(got) != 2 {
			t.Errorf("the Company recorded %q", got)
		}
		if na, nb := a.opens.Load(), b.opens.Load(); (na == 0) == (nb == 0) {
			t.Errorf("the Workers opened %d and %d Sessions: want one Worker on the person's messages, under its lease", na, nb)
		}
	})
}

// TestWorkerStops: a Worker backing off between rounds stops when its
// context ends, gives its lease back (another Worker takes over at once,
// not after the lease's expiry) and leaves no goroutine behind (the
// bubble fails otherwise).
func TestWorkerStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		leftDown(t, co, 1000, "Later")
		w, err := NewWorker(co.st, &WorkerOptions{Open: func(context.Context, string, string, Owner) (*Tracker, func(), error) {
			return nil, nil, errors.New("no Session")
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { w.Run(ctx) })
		time.Sleep(time.Minute)
		if _, err := co.st.AcquireLease(context.Background(), workerLease, "another replica", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("the Worker holds no lease while it backs off: %v", err)
		}
		cancel()
		wg.Wait()
		if _, err := co.st.AcquireLease(context.Background(), workerLease, "another replica", time.Minute); err != nil {
			t.Errorf("the lease after the Worker stopped: %v", err)
		}
	})
}

// TestWorkerTakesOverFromDeadReplica: a person's messages whose Worker
// lease is held by a replica that died (it never renews it) are left
// alone until the lease expires, then sent by another replica's Worker at
// a sweep. Leases expire by the database's clock, which a synctest bubble
// does not move, so this test runs on the real clock, with a short lease.
func TestWorkerTakesOverFromDeadReplica(t *testing.T) {
	t.Parallel()
	co := newCompany(t, nil, nil)
	u := leftDown(t, co, 1, "Ship it to the office")
	dead, err := co.st.AcquireLease(context.Background(), workerLease, "the replica that died", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	co.runWorkerWith(t, co.st, nil, &WorkerOptions{Sweep: 100 * time.Millisecond})
	for end := time.Now().Add(20 * time.Second); len(co.texts(u.ConversationID)) < 2 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	msgs := co.srv.Messages(u.ConversationID)
	if len(msgs) != 2 {
		t.Fatalf("not sent after the dead replica's lease expired: the Company has %+v", msgs)
	}
	if msgs[1].Time.Before(dead.ExpiresAt) {
		t.Errorf("sent at %s, under the dead replica's lease (until %s)", msgs[1].Time, dead.ExpiresAt)
	}
}

// TestWorkerWakesOnPending: a Worker already running hears at once of a
// message left pending (PendingChannel) and sends it before its next
// sweep, 30 s later.
func TestWorkerWakesOnPending(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		u := started(t, co.tracker(t), "Hello")
		co.runWorker(t, co.st, nil)
		synctest.Wait() // its first sweep found nothing
		co.srv.UnavailableNextPosts(1)
		if _, err := co.dyingTracker(t, nil).Send(context.Background(), u.ConversationID, textMsg("Size M"), nil); err == nil {
			t.Fatal("the send to an unavailable Company succeeded")
		}
		if !within(20*time.Second, func() bool { return len(co.texts(u.ConversationID)) == 2 }) {
			t.Fatalf("not sent before the next sweep: the Company has %q", co.texts(u.ConversationID))
		}
	})
}
