// This file implements the Worker: it sends the messages left pending
// (pending.go) in the background, whether or not their person calls
// again, each with its ID (Poppy 0.1 §7.3 "Message IDs": "To retry a
// message, it sends it again with the same ID. If the Company has already
// accepted a message with that ID and the same content, it returns the
// original response and doesn't add the message again."), so the Company
// records it once. It finds the people with pending messages with one
// query of the whole store (store.Store.SecretHolders), when a message is
// left pending (PendingChannel) and at every sweep. One person's messages
// are sent by one Worker at a time across every replica sharing the store:
// it holds a lease on that person's pending messages while it sends them
// and backs off between rounds, and a replica that dies loses it to the
// next Worker that sweeps. Each message's own lease (pending.go) still
// keeps a Worker and a person's call from sending it at once.

package conversation

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// pendingRoot is the prefix of every pending message of every Company and
// User in a person's view of the store (Tracker.pendingPrefix).
const pendingRoot = "conversation/pending/"

// workerLease names the lease a Worker holds on one person's pending
// messages (leases are per local user: store.Store.ForUser).
const workerLease = "conversation-pending-worker"

// WorkerLeaseTTL is how long a Worker's lease on a person's pending
// messages lasts unless renewed (every third, while it works on them): a
// replica that died leaves them to another replica's Worker this long
// after, at its next sweep.
const WorkerLeaseTTL = 30 * time.Second

// WorkerOptions configure NewWorker.
type WorkerOptions struct {
	// Open returns a Tracker of owner's conversations that sends through a
	// Session of the person of the local user key (person is what their
	// Tracker's TrackerOptions.Person said), and done, to call once the
	// Worker is finished with it. An error means no Session can be opened
	// now: the Worker tries again after its back-off. Required.
	Open func(ctx context.Context, key, person string, owner Owner) (tr *Tracker, done func(), err error)
	// Sweep is how often the Worker looks for pending messages besides
	// the notifications (PendingChannel), which may be lost. Zero: 30 s.
	Sweep time.Duration
	// NewBackOff returns the wait between two rounds of sending one
	// person's messages that were not all delivered; backoff.Stop gives
	// them up until the next sweep. Zero: exponential from 1 s to 1 min,
	// without end (TrackerOptions.PendingMaxAge ends each message).
	NewBackOff func() backoff.BackOff
	// MaxPeople is how many people's messages the Worker sends at once;
	// the others wait for a later sweep. Zero: 64.
	MaxPeople int
	// Logger receives what the Worker could not do (never a message's
	// text or a person's identity). Nil discards it.
	Logger *slog.Logger
}

// Worker sends pending messages in the background. It is safe for
// concurrent use; Run it once.
type Worker struct {
	st   *store.Store // the whole state: every person's view is made from it
	opts WorkerOptions
	wg   sync.WaitGroup // the people being worked on

	// mu guards active.
	mu     sync.Mutex
	active map[string]bool // the local users this Worker works on now
}

// NewWorker returns a Worker of the pending messages of every person in st.
func NewWorker(st *store.Store, opts *WorkerOptions) (*Worker, error) {
	if st == nil || opts == nil || opts.Open == nil {
		return nil, errors.New("conversation: NewWorker needs a store and WorkerOptions.Open")
	}
	w := &Worker{st: st, opts: *opts, active: map[string]bool{}}
	if w.opts.Sweep <= 0 {
		w.opts.Sweep = 30 * time.Second
	}
	if w.opts.NewBackOff == nil {
		w.opts.NewBackOff = defaultWorkerBackOff
	}
	if w.opts.MaxPeople <= 0 {
		w.opts.MaxPeople = 64
	}
	if w.opts.Logger == nil {
		w.opts.Logger = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

func defaultWorkerBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(time.Second),
		backoff.WithMaxInterval(time.Minute),
		backoff.WithMaxElapsedTime(0),
	)
}

// Run sends pending messages until ctx ends, then waits for the sends in
// flight to stop and gives back its leases.
func (w *Worker) Run(ctx context.Context) {
	defer w.wg.Wait()
	notes, err := w.st.Listen(ctx, PendingChannel)
	if err != nil {
		w.opts.Logger.Warn("cannot hear of messages left pending; the sweep finds them", "err", err)
	}
	t := time.NewTicker(w.opts.Sweep)
	defer t.Stop()
	for {
		w.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case _, ok := <-notes:
			if !ok {
				notes = nil // the Store is closing, or ctx ended
			}
			drain(notes) // one sweep answers every notification so far
		case <-t.C:
		}
	}
}

// drain takes the notifications already waiting on notes.
func drain(notes <-chan string) {
	for {
		select {
		case _, ok := <-notes:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// sweep starts working on each person with pending messages whom no
// Worker works on, up to MaxPeople at once.
func (w *Worker) sweep(ctx context.Context) {
	users, err := w.st.SecretHolders(ctx, pendingRoot) // one query, however many people
	if err != nil {
		if ctx.Err() == nil {
			w.opts.Logger.Debug("could not list the people with pending messages", "err", err)
		}
		return
	}
	for _, key := range users {
		if !w.claim(key) {
			continue
		}
		view := w.st.ForUser(key)
		l, err := view.AcquireLease(ctx, workerLease, holderID(), WorkerLeaseTTL)
		if err != nil { // another replica's Worker has them, or the store failed
			w.unclaim(key)
			continue
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer w.unclaim(key)
			w.person(ctx, view, l)
		}()
	}
}

// claim marks key worked on by this Worker, unless it is already or
// MaxPeople are.
func (w *Worker) claim(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.active[key] || len(w.active) >= w.opts.MaxPeople {
		return false
	}
	w.active[key] = true
	return true
}

func (w *Worker) unclaim(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.active, key)
}

// holderID is a new lease holder: one piece of work.
func holderID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// person sends the pending messages of the person view is of, under the
// lease l, in rounds with a back-off between them, until none is left or
// ctx ends or the lease is lost; then it gives the lease back.
func (w *Worker) person(ctx context.Context, view *store.Store, l store.Lease) {
	held, stop := view.KeepLease(ctx, l, WorkerLeaseTTL)
	defer func() {
		stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = view.ReleaseLease(rctx, l) // a lease not given back expires
	}()
	b := backoff.WithContext(w.opts.NewBackOff(), held)
	b.Reset()
	for {
		if left := w.round(held, view); left == 0 || held.Err() != nil {
			return
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return // the next sweep starts again
		}
		pause := time.NewTimer(d)
		select {
		case <-held.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// round sends each pending message of the person once, grouped by the
// Tracker that left it, and returns how many are still pending.
func (w *Worker) round(ctx context.Context, view *store.Store) (left int) {
	groups, err := pendingByOwner(ctx, view)
	if err != nil {
		w.opts.Logger.Debug("could not read the pending messages", "err", err)
		return 1
	}
	for _, g := range groups {
		left += w.deliver(ctx, view, g)
	}
	return left
}

// pendingGroup is the pending messages one Tracker left.
type pendingGroup struct {
	owner  Owner
	person string
	names  []string
}

// pendingByOwner reads the person's pending messages and groups them by
// the Tracker that left them, in name order. Records of older versions,
// which do not say whose they are, are left to the person's calls.
func pendingByOwner(ctx context.Context, view *store.Store) ([]*pendingGroup, error) {
	names, err := view.SecretNames(ctx, pendingRoot)
	if err != nil {
		return nil, err
	}
	var groups []*pendingGroup
	for _, name := range names {
		rec, err := loadPending(ctx, view, name)
		if errors.Is(err, store.ErrNotFound) || err == nil && rec.Domain == "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(groups, func(g *pendingGroup) bool { return g.owner == rec.owner() && g.person == rec.Person })
		if i < 0 {
			groups, i = append(groups, &pendingGroup{owner: rec.owner(), person: rec.Person}), len(groups)
		}
		groups[i].names = append(groups[i].names, name)
	}
	return groups, nil
}

// deliver sends the group's messages through a Tracker of their person
// and returns how many are still pending.
func (w *Worker) deliver(ctx context.Context, view *store.Store, g *pendingGroup) (left int) {
	tr, done, err := w.opts.Open(ctx, view.User(), g.person, g.owner)
	if err == nil && tr.owner != g.owner {
		done()
		err = errors.New("conversation: the Session opened is another User's")
	}
	if err != nil {
		if ctx.Err() == nil {
			w.opts.Logger.Info("cannot send pending messages now: no Session", "issuer", g.owner.Issuer, "err", err)
		}
		return len(g.names)
	}
	defer done()
	for _, name := range g.names {
		r, ok, err := tr.resendOne(ctx, name, "", true)
		switch {
		case err != nil && ctx.Err() == nil:
			w.opts.Logger.Debug("could not send a pending message", "issuer", g.owner.Issuer, "err", err)
		case ok && r.Outcome == ResentUnconfirmed:
			w.opts.Logger.Debug("a pending message sent again is still not confirmed", "issuer", g.owner.Issuer, "err", r.Err)
		case ok:
			w.opts.Logger.Info("a pending message is settled in the background", "issuer", g.owner.Issuer, "outcome", r.Outcome, "err", r.Err)
		}
		if _, err := tr.pending(ctx, name); !errors.Is(err, store.ErrNotFound) {
			left++
		}
	}
	return left
}
