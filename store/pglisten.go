package store

// This file keeps the one PostgreSQL connection a Store listens on: it
// LISTENs on every channel its listeners want, hands each notification on,
// and reconnects (listening again) when the connection drops. A pgx.Conn
// is not safe for concurrent use, so one goroutine owns it; to LISTEN on a
// new channel, the others wake it from its wait, which pgx allows
// (a cancelled WaitForNotification leaves the connection usable).

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnect delays of the listening connection: from the first to the
// largest, doubling.
const (
	listenRetryFirst = 50 * time.Millisecond
	listenRetryMax   = 5 * time.Second
)

// pgListener is the listening connection of one Store. It is safe for
// concurrent use.
type pgListener struct {
	cfg      *pgx.ConnConfig
	received func(channel, payload string)

	mu sync.Mutex
	// want counts the listeners of each PostgreSQL channel.
	want map[string]int
	// listened is what the current connection LISTENs on.
	listened map[string]bool
	// dirty says want changed since the loop last looked.
	dirty bool
	// waiting are the ensure calls waiting for the loop to LISTEN.
	waiting []chan error
	// wake ends the loop's current wait; nil when it is not waiting.
	wake context.CancelFunc
	// pid is the backend of the current connection (for tests); 0 when none.
	pid     uint32
	running bool
	closed  bool
	stop    context.CancelFunc
	done    chan struct{}
}

func newPGListener(cfg *pgx.ConnConfig, received func(channel, payload string)) *pgListener {
	cfg = cfg.Copy()
	cfg.RuntimeParams["application_name"] = "poppy-mcp notifications"
	return &pgListener{cfg: cfg, received: received, want: map[string]int{}, listened: map[string]bool{}}
}

// ensure returns once the connection LISTENs on channel.
func (l *pgListener) ensure(ctx context.Context, channel string) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrStoreClosed
	}
	l.want[channel]++
	if l.listened[channel] {
		l.mu.Unlock()
		return nil
	}
	ack := make(chan error, 1)
	l.waiting = append(l.waiting, ack)
	l.changed()
	if !l.running {
		l.running = true
		lctx, stop := context.WithCancel(context.Background())
		l.stop, l.done = stop, make(chan struct{})
		go l.loop(lctx)
	}
	l.mu.Unlock()
	select {
	case err := <-ack:
		if err != nil {
			l.release(channel)
		}
		return err
	case <-ctx.Done():
		l.release(channel)
		return ctx.Err()
	}
}

// release forgets one listener of channel; the last one's leaving
// UNLISTENs it.
func (l *pgListener) release(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.want[channel]--; l.want[channel] <= 0 {
		delete(l.want, channel)
		l.changed()
	}
}

// changed marks want changed and wakes the loop; l.mu is held.
func (l *pgListener) changed() {
	l.dirty = true
	if l.wake != nil {
		l.wake()
	}
}

// close stops the loop and closes the connection.
func (l *pgListener) close() {
	l.mu.Lock()
	l.closed = true
	running, stop, done := l.running, l.stop, l.done
	l.mu.Unlock()
	if running {
		stop()
		<-done
	}
}

// loop owns the connection until ctx ends.
func (l *pgListener) loop(ctx context.Context) {
	defer close(l.done)
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(context.Background())
		}
	}()
	delay := listenRetryFirst
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = l.connect(ctx); err != nil {
				l.fail(err)
				sleep(ctx, delay)
				delay = min(2*delay, listenRetryMax)
				continue
			}
			delay = listenRetryFirst
		}
		if err := l.sync(ctx, c); err != nil {
			l.drop(c, err)
			c = nil
			continue
		}
		n, interrupted, err := l.wait(ctx, c)
		switch {
		case err == nil:
			l.received(n.Channel, n.Payload)
		case interrupted || ctx.Err() != nil:
		default: // the connection is gone: connect and LISTEN again
			l.drop(c, err)
			c = nil
		}
	}
}

// connect opens a new listening connection, which LISTENs on nothing yet.
func (l *pgListener) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.pid, l.listened, l.dirty = c.PgConn().PID(), map[string]bool{}, true
	l.mu.Unlock()
	return c, nil
}

// drop closes a failed connection and fails the ensure calls waiting.
func (l *pgListener) drop(c *pgx.Conn, err error) {
	c.Close(context.Background())
	l.mu.Lock()
	l.pid, l.listened, l.dirty = 0, map[string]bool{}, true
	l.mu.Unlock()
	l.fail(err)
}

// fail answers every waiting ensure call with err.
func (l *pgListener) fail(err error) {
	l.mu.Lock()
	waiting := l.waiting
	l.waiting = nil
	l.mu.Unlock()
	for _, ack := range waiting {
		ack <- err
	}
}

// sync makes c LISTEN on what is wanted and nothing else, then answers
// the ensure calls waiting.
func (l *pgListener) sync(ctx context.Context, c *pgx.Conn) error {
	l.mu.Lock()
	if !l.dirty {
		l.mu.Unlock()
		return nil
	}
	l.dirty = false
	var add, remove []string
	for ch := range l.want {
		if !l.listened[ch] {
			add = append(add, ch)
		}
	}
	for ch := range l.listened {
		if l.want[ch] == 0 {
			remove = append(remove, ch)
		}
	}
	waiting := l.waiting
	l.waiting = nil
	l.mu.Unlock()
	err := l.apply(ctx, c, add, remove)
	for _, ack := range waiting {
		ack <- err
	}
	return err
}

// apply runs the LISTEN and UNLISTEN statements on c.
func (l *pgListener) apply(ctx context.Context, c *pgx.Conn, add, remove []string) error {
	for _, ch := range add {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
		l.mu.Lock()
		l.listened[ch] = true
		l.mu.Unlock()
	}
	for _, ch := range remove {
		if _, err := c.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
		l.mu.Lock()
		delete(l.listened, ch)
		l.mu.Unlock()
	}
	return nil
}

// wait waits for the next notification on c, or for changed to wake it
// (interrupted).
func (l *pgListener) wait(ctx context.Context, c *pgx.Conn) (n *pgNotification, interrupted bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.mu.Lock()
	if l.dirty {
		cancel()
	}
	l.wake = cancel
	l.mu.Unlock()
	got, err := c.WaitForNotification(wctx)
	l.mu.Lock()
	l.wake = nil
	l.mu.Unlock()
	if err != nil {
		return nil, wctx.Err() != nil && ctx.Err() == nil, err
	}
	return &pgNotification{Channel: got.Channel, Payload: got.Payload}, false, nil
}

// pgNotification is one notification received.
type pgNotification struct{ Channel, Payload string }

// backendPID returns the PostgreSQL backend of the listening connection,
// or 0 when there is none.
func (l *pgListener) backendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
