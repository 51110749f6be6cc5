package memnet

// This file is the connection: two buffered halves, one each way, whose
// readers wait on a sync.Cond, which testing/synctest counts as durably
// blocked (net.Pipe's unbuffered writes would wait for the peer instead).

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Pipe returns the two ends of a new in-memory connection: what one writes
// the other reads. local and remote are the first end's addresses.
func Pipe(local, remote net.Addr) (net.Conn, net.Conn) {
	ab, ba := newHalf(), newHalf()
	return &conn{in: ba, out: ab, local: local, remote: remote},
		&conn{in: ab, out: ba, local: remote, remote: local}
}

// half is one direction of a connection. It is safe for concurrent use.
type half struct {
	// mu guards everything below; cond waits on it.
	mu   sync.Mutex
	cond sync.Cond
	buf  []byte
	// eof: the writing end closed; the reader sees io.EOF once buf is empty.
	eof bool
	// gone: the reading end closed; writes fail and reads return net.ErrClosed.
	gone bool
	// readBy and writeBy are the deadlines of the reading and writing end.
	readBy, writeBy time.Time
	wake            *time.Timer // wakes readers at readBy
}

func newHalf() *half {
	h := &half{}
	h.cond.L = &h.mu
	return h
}

// conn is one end of a Pipe.
type conn struct {
	in, out       *half
	local, remote net.Addr
}

// Read reads what the peer wrote, waiting until there is some, the peer
// closes (io.EOF), this end closes or the read deadline passes.
func (c *conn) Read(p []byte) (int, error) {
	h := c.in
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		switch {
		case h.gone:
			return 0, net.ErrClosed
		case len(h.buf) > 0:
			n := copy(p, h.buf)
			h.buf = h.buf[n:]
			return n, nil
		case h.eof:
			return 0, io.EOF
		case passed(h.readBy):
			return 0, os.ErrDeadlineExceeded
		}
		h.cond.Wait()
	}
}

// Write buffers p for the peer at once: it never waits for a reader.
func (c *conn) Write(p []byte) (int, error) {
	h := c.out
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.eof:
		return 0, net.ErrClosed
	case h.gone:
		return 0, io.ErrClosedPipe
	case passed(h.writeBy):
		return 0, os.ErrDeadlineExceeded
	}
	h.buf = append(h.buf, p...)
	h.cond.Broadcast()
	return len(p), nil
}

// Close closes both directions: a read waiting here returns, the peer reads
// what is left and then io.EOF, and the peer's writes fail.
func (c *conn) Close() error {
	c.in.end(func(h *half) { h.gone = true })
	c.out.end(func(h *half) { h.eof = true })
	return nil
}

// end marks h closed from one side and wakes its reader.
func (h *half) end(mark func(*half)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	mark(h)
	h.cond.Broadcast()
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets when a waiting Read gives up, on the time package's
// clock (the bubble's, in a synctest bubble).
func (c *conn) SetReadDeadline(t time.Time) error {
	h := c.in
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readBy = t
	if h.wake != nil {
		h.wake.Stop()
		h.wake = nil
	}
	if !t.IsZero() {
		h.wake = time.AfterFunc(time.Until(t), func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.cond.Broadcast()
		})
	}
	h.cond.Broadcast()
	return nil
}

// SetWriteDeadline sets when Write fails; since Write never waits, it only
// fails once the deadline has passed.
func (c *conn) SetWriteDeadline(t time.Time) error {
	h := c.out
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writeBy = t
	return nil
}

// passed reports whether the deadline t is set and has passed.
func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }
