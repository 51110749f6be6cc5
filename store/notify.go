package store

// This file implements notifications: short messages on named channels
// from any process or replica sharing the state to those listening there,
// for the few things that must reach another replica (the work for a
// person's MCP session done elsewhere, a lease given back). On PostgreSQL
// they are LISTEN/NOTIFY, through one connection per Store that listens on
// every channel its listeners want (pglisten.go); on SQLite they stay in
// the process, between the views of one Store.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"unicode/utf8"
)

// MaxNotifyPayload is the largest payload Notify sends, in bytes: well
// under PostgreSQL's limit of 8000 bytes per notification. Send an ID and
// keep what it names in the database.
const MaxNotifyPayload = 4000

// notifyBuffer is how many notifications a listener may fall behind by
// before the next ones are dropped for it.
const notifyBuffer = 64

// channelName is what a notification channel may be called: it becomes
// part of a PostgreSQL identifier.
var channelName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// leaseChannel carries the key of each lease given back (leaseKey), so
// that WaitLease wakes at once. Its name cannot be a caller's.
const leaseChannel = "_lease"

// ErrStoreClosed is matched (with errors.Is) by Listen's error once the
// Store is closed.
var ErrStoreClosed = errors.New("store: closed")

// Notify sends payload to every listener of channel. It is at-most-once:
// on PostgreSQL a listener gets it if it was listening when the
// notification committed and its connection stayed up; on SQLite only
// the listeners of this Store (and its views) get it, never another
// process's. A listener that has fallen behind by many notifications
// misses the next ones. So a notification says "look again", and what it
// is about is kept in the database. channel is 1 to 32 of a-z, 0-9 and _,
// starting with a letter; payload is at most MaxNotifyPayload bytes of
// UTF-8 without NUL. Notifications are shared by every local user: say in
// the payload whom one is for.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if err := checkChannel(channel); err != nil {
		return err
	}
	if len(payload) > MaxNotifyPayload || !utf8.ValidString(payload) || containsNUL(payload) {
		return fmt.Errorf("store: notify %s: the payload must be at most %d bytes of UTF-8 without NUL",
			channel, MaxNotifyPayload)
	}
	return s.notify(ctx, channel, payload)
}

// notify sends without checking channel and payload.
func (s *Store) notify(ctx context.Context, channel, payload string) error {
	if s.notes.pg == nil {
		s.notes.publish(channel, payload)
		return nil
	}
	if _, err := s.conn().exec(ctx, `SELECT pg_notify(?, ?)`, s.notes.pgName(channel), payload); err != nil {
		return fmt.Errorf("store: notify %s: %w", channel, err)
	}
	return nil
}

// Listen returns the payloads sent on channel from now on, until ctx ends
// (the channel is then closed). Once Listen returns, every notification
// sent afterwards reaches it, within the limits Notify documents.
func (s *Store) Listen(ctx context.Context, channel string) (<-chan string, error) {
	if err := checkChannel(channel); err != nil {
		return nil, err
	}
	ch, stop, err := s.notes.listen(ctx, channel)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, stop)
	return ch, nil
}

func checkChannel(channel string) error {
	if !channelName.MatchString(channel) {
		return fmt.Errorf("store: %q is not a notification channel (1 to 32 of a-z, 0-9, _, from a letter)", channel)
	}
	return nil
}

func containsNUL(s string) bool {
	for i := range len(s) {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// notifier hands notifications to the listeners of one Store. It is safe
// for concurrent use.
type notifier struct {
	// prefix namespaces PostgreSQL channels by the state, so two states in
	// one database (two schemas) do not hear each other.
	prefix string
	pg     *pgListener // nil on SQLite

	mu     sync.Mutex
	subs   map[string]map[chan string]struct{} // channel → listeners
	closed bool
}

// startNotes sets up s's notifications; on PostgreSQL the listening
// connection opens at the first Listen.
func (s *Store) startNotes(ctx context.Context) error {
	id, err := s.storeID(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(id))
	n := &notifier{prefix: "poppy_" + hex.EncodeToString(sum[:4]) + "_", subs: map[string]map[chan string]struct{}{}}
	if s.pgConfig != nil {
		n.pg = newPGListener(s.pgConfig, n.received)
	}
	s.notes = n
	return nil
}

// pgName is the PostgreSQL channel of channel.
func (n *notifier) pgName(channel string) string { return n.prefix + channel }

// received hands on a notification from PostgreSQL.
func (n *notifier) received(pgChannel, payload string) {
	if len(pgChannel) > len(n.prefix) && pgChannel[:len(n.prefix)] == n.prefix {
		n.publish(pgChannel[len(n.prefix):], payload)
	}
}

// publish gives payload to every listener of channel that has room for it.
func (n *notifier) publish(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[channel] {
		select {
		case ch <- payload:
		default: // fallen behind: at most once
		}
	}
}

// listen adds a listener of channel; stop removes it and closes its
// channel, once.
func (n *notifier) listen(ctx context.Context, channel string) (ch chan string, stop func(), err error) {
	ch = make(chan string, notifyBuffer)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, nil, ErrStoreClosed
	}
	if n.subs[channel] == nil {
		n.subs[channel] = map[chan string]struct{}{}
	}
	n.subs[channel][ch] = struct{}{}
	n.mu.Unlock()
	remove := sync.OnceFunc(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if _, ok := n.subs[channel][ch]; ok {
			delete(n.subs[channel], ch)
			close(ch)
		}
	})
	if n.pg == nil {
		return ch, remove, nil
	}
	if err := n.pg.ensure(ctx, n.pgName(channel)); err != nil {
		remove()
		return nil, nil, fmt.Errorf("store: listen %s: %w", channel, err)
	}
	return ch, sync.OnceFunc(func() { remove(); n.pg.release(n.pgName(channel)) }), nil
}

// close closes every listener's channel and the listening connection.
// Closing twice is fine.
func (n *notifier) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		for _, set := range n.subs {
			for ch := range set {
				close(ch)
			}
		}
		n.subs = nil
	}
	n.mu.Unlock()
	if n.pg != nil {
		n.pg.close()
	}
}

// leaseKey is what a lease's release notification carries: a digest of
// its user and name, the same length whatever the name.
func leaseKey(user, name string) string {
	sum := sha256.Sum256([]byte(user + "\x00" + name))
	return hex.EncodeToString(sum[:16])
}
