// Package mcpproxy relays a Company's MCP servers (Poppy 0.1 §6) to
// poppy-mcp's own MCP clients.
//
// An Upstream is one MCP server reached over streamable HTTP with mcp-go's
// client, pinned to a protocol revision the server accepts (2025-11-25 by
// default: sessions, and a GET stream for notifications/tools/list_changed).
// It connects lazily on first use, closes the connection when idle, starts a
// new MCP session after a 404 (the server forgot the session, as after a
// restart) and reconnects with exponential backoff while the server is down.
// Tools are listed raw, every page, so their schemas are kept byte for byte
// (mcp-go's typed ListTools drops top-level anyOf, description and
// $schema), and results are relayed as the server sent them.
//
// A Relay announces an Upstream's tools on an mcp-go server under a prefix
// and keeps them in step with the upstream's list_changed.
//
// mcpproxy builds no auth header: the *http.Client it is given does (for a
// Company, auth.Session.BearerClient, which sends a Bearer Session Token
// issued for the server's url to that url only, Poppy 0.1 §4.3). Nothing of
// the downstream request but the tool's arguments goes upstream: never its
// headers, never its credentials.
package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Version is reported to upstream servers in clientInfo.
const Version = "0.1.0-dev"

// Options configure an Upstream. The zero value of every field is usable.
type Options struct {
	// HTTPClient returns the client for a new connection. It is called at
	// every (re)connection, so it can hand out the current Session's Bearer
	// client (auth.Session.BearerClient). Nil: http.DefaultClient, which
	// sends no token.
	HTTPClient func() (*http.Client, error)
	// Prefix goes before every relayed tool name. It must match
	// ^[a-zA-Z0-9_-]{0,32}$. Zero: none.
	Prefix string
	// ProtocolVersion is the MCP revision asked for in initialize; the
	// server may answer with an older one it supports. Zero: 2025-11-25,
	// the newest with a GET stream for list_changed (docs/mcp-go.md: pin the protocol).
	ProtocolVersion string
	// IdleTimeout closes the connection (and its GET stream) after this
	// long without a request; the next request reconnects and the tool list
	// is checked again. Zero: 10 minutes. Negative: never.
	IdleTimeout time.Duration
	// ConnectWithin bounds how long one connection attempt retries with
	// exponential backoff while the server cannot be reached. Zero: 30 s.
	ConnectWithin time.Duration
	// Logger receives operational logs (never tokens). Nil: discard.
	Logger *slog.Logger
}

// Upstream is one upstream MCP server. It is safe for concurrent use.
type Upstream struct {
	url  string
	opts Options
	log  *slog.Logger
	seq  atomic.Uint64 // request IDs and progress tokens

	life context.Context // lifetime of GET streams and background reconnects
	stop context.CancelFunc

	// mu guards every field below.
	mu       sync.Mutex
	conn     *conn         // the live connection; nil when there is none
	dialing  chan struct{} // closed when the running connect ends; nil when none runs
	dialErr  error         // the last connect's error
	gens     int           // connections made so far
	inflight int           // requests on conn
	idle     *time.Timer
	closed   bool
	changed  func() // OnToolsChanged
	changing bool   // a call of changed runs
	again    bool   // a change came while it ran: call it once more

	// progMu guards progress.
	progMu   sync.Mutex
	progress map[string]ProgressFunc // upstream progress token -> the call's relay
}

// conn is one MCP session with the upstream.
type conn struct {
	c       *client.Client
	gen     int
	version string // the negotiated protocol revision
}

var validPrefix = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,32}$`)

// New returns an Upstream for the MCP server at rawURL (https, or http for
// a loopback test server). It does not connect: the first request does.
func New(rawURL string, opts *Options) (*Upstream, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("mcpproxy: %q is not an http(s) URL", rawURL)
	}
	up := &Upstream{url: rawURL, progress: map[string]ProgressFunc{}}
	if opts != nil {
		up.opts = *opts
	}
	if !validPrefix.MatchString(up.opts.Prefix) {
		return nil, fmt.Errorf("mcpproxy: prefix %q does not match %s", up.opts.Prefix, validPrefix)
	}
	if up.opts.ProtocolVersion == "" {
		up.opts.ProtocolVersion = mcp.ProtocolVersion20251125
	}
	if up.opts.IdleTimeout == 0 {
		up.opts.IdleTimeout = 10 * time.Minute
	}
	if up.opts.ConnectWithin <= 0 {
		up.opts.ConnectWithin = 30 * time.Second
	}
	up.log = up.opts.Logger
	if up.log == nil {
		up.log = slog.New(slog.DiscardHandler)
	}
	up.life, up.stop = context.WithCancel(context.Background())
	return up, nil
}

// URL is the server's url.
func (u *Upstream) URL() string { return u.url }

// OnToolsChanged sets f to be called, on its own goroutine, when the
// server's tool list may have changed: on its notifications/tools/list_changed,
// and after a reconnection (a change may have been missed meanwhile). Calls
// do not overlap, and a burst collapses: the changes that come while f runs
// make one more call after it.
func (u *Upstream) OnToolsChanged(f func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.changed = f
}

// toolsChanged calls OnToolsChanged's f in the background, or, while a call
// runs, marks that one more is due.
func (u *Upstream) toolsChanged() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.changed == nil {
		return
	}
	if u.changing {
		u.again = true
		return
	}
	u.changing = true
	go func() {
		for {
			u.mu.Lock()
			f := u.changed
			u.again = false
			u.mu.Unlock()
			if f != nil {
				f()
			}
			u.mu.Lock()
			if !u.again {
				u.changing = false
				u.mu.Unlock()
				return
			}
			u.mu.Unlock()
		}
	}()
}

// Reset drops the connection; the next request connects anew with a client
// from Options.HTTPClient (after a new Session, for its token).
func (u *Upstream) Reset() {
	u.mu.Lock()
	old := u.conn
	u.conn = nil
	u.stopIdleLocked()
	u.mu.Unlock()
	if old != nil {
		go old.c.Close()
	}
}

// Close closes the connection (ending the MCP session with DELETE) and
// makes every later request fail.
func (u *Upstream) Close() error {
	u.mu.Lock()
	old := u.conn
	u.conn, u.closed = nil, true
	u.stopIdleLocked()
	u.mu.Unlock()
	u.stop()
	if old != nil {
		return old.c.Close()
	}
	return nil
}

// ErrClosed is returned by requests on a closed Upstream.
var ErrClosed = errors.New("mcpproxy: upstream closed")

// acquire returns the live connection, connecting first when there is none,
// and counts a request on it; release ends the count.
func (u *Upstream) acquire(ctx context.Context) (*conn, error) {
	u.mu.Lock()
	for {
		if u.closed {
			u.mu.Unlock()
			return nil, ErrClosed
		}
		if u.conn != nil {
			u.inflight++
			u.stopIdleLocked()
			c := u.conn
			u.mu.Unlock()
			return c, nil
		}
		if u.dialing == nil {
			u.dialing = make(chan struct{})
			go u.connect()
		}
		ch := u.dialing
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		u.mu.Lock()
		if u.conn == nil && u.dialErr != nil {
			err := u.dialErr
			u.mu.Unlock()
			return nil, err
		}
	}
}

// release ends a request on c, and arms the idle timer after the last one.
func (u *Upstream) release(c *conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inflight--
	if u.inflight == 0 && u.conn == c && u.opts.IdleTimeout > 0 {
		u.stopIdleLocked()
		u.idle = time.AfterFunc(u.opts.IdleTimeout, func() { u.closeIdle(c) })
	}
}

func (u *Upstream) stopIdleLocked() {
	if u.idle != nil {
		u.idle.Stop()
		u.idle = nil
	}
}

// closeIdle closes c if it is still the connection and unused.
func (u *Upstream) closeIdle(c *conn) {
	u.mu.Lock()
	if u.conn != c || u.inflight > 0 {
		u.mu.Unlock()
		return
	}
	u.conn = nil
	u.mu.Unlock()
	u.log.Debug("mcpproxy: closing idle connection", "url", u.url)
	_ = c.c.Close()
}

// drop forgets c when the server no longer knows its session (404); the
// next request connects anew. It reports whether c was the connection.
func (u *Upstream) drop(c *conn) bool {
	u.mu.Lock()
	mine := u.conn == c
	if mine {
		u.conn = nil
		u.stopIdleLocked()
	}
	u.mu.Unlock()
	if mine {
		go c.c.Close()
	}
	return mine
}

// connect makes a connection, retrying with exponential backoff within
// ConnectWithin, and wakes the requests waiting for it.
func (u *Upstream) connect() {
	ctx, cancel := context.WithTimeout(u.life, u.opts.ConnectWithin)
	defer cancel()
	var c *conn
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(2*time.Second), backoff.WithMaxElapsedTime(0))
	err := backoff.Retry(func() error {
		var err error
		c, err = u.dialOnce(ctx)
		if err != nil && !retryable(err) {
			return backoff.Permanent(err)
		}
		if err != nil {
			u.log.Info("mcpproxy: cannot connect yet; retrying", "url", u.url, "err", err)
		}
		return err
	}, backoff.WithContext(b, ctx))
	u.mu.Lock()
	if err == nil && u.closed {
		err = ErrClosed
		defer c.c.Close()
	}
	u.dialErr = err
	if err == nil {
		u.conn = c
	}
	close(u.dialing)
	u.dialing = nil
	notify := err == nil && c.gen > 1
	u.mu.Unlock()
	if err != nil {
		u.log.Info("mcpproxy: cannot connect", "url", u.url, "err", err)
	}
	if notify {
		u.toolsChanged() // a change may have come while there was no connection
	}
}

// transportLog is the log of mcp-go's client transport, whose records are
// about its own machinery ("listening to server forever" on each connection
// at info): they go one level down, info to debug, each marked as mcp-go's.
// Warnings and errors stay as they are.
type transportLog struct{ slog.Handler }

func demote(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (h transportLog) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(l))
}

func (h transportLog) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, demote(r.Level), "mcpproxy: mcp-go: "+r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return h.Handler.Handle(ctx, out)
}

func (h transportLog) WithAttrs(as []slog.Attr) slog.Handler {
	return transportLog{h.Handler.WithAttrs(as)}
}

func (h transportLog) WithGroup(name string) slog.Handler {
	return transportLog{h.Handler.WithGroup(name)}
}

// dialOnce starts mcp-go's client and runs the initialize handshake.
func (u *Upstream) dialOnce(ctx context.Context) (*conn, error) {
	hc := http.DefaultClient
	if u.opts.HTTPClient != nil {
		var err error
		if hc, err = u.opts.HTTPClient(); err != nil {
			return nil, fmt.Errorf("mcpproxy: no HTTP client for %s: %w", u.url, err)
		}
	}
	u.mu.Lock()
	u.gens++
	gen := u.gens
	u.mu.Unlock()
	watched := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	watched.Transport = &watcher{base: base, gone: func() { u.sessionGone(gen) }, down: func() { u.sessionGone(gen) }}
	tr, err := transport.NewStreamableHTTP(u.url,
		transport.WithHTTPBasicClient(&watched),
		transport.WithContinuousListening(), // list_changed on the GET stream
		transport.WithHTTPLogger(slog.New(transportLog{u.log.With("url", u.url).Handler()})))
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: %w", err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(u.opts.ProtocolVersion))
	c.OnNotification(func(n mcp.JSONRPCNotification) { u.notification(n) })
	if err := c.Start(u.life); err != nil {
		return nil, upstreamError(err, "mcpproxy: starting %s", u.url)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = u.opts.ProtocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "poppy-mcp", Version: Version}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		_ = c.Close()
		return nil, upstreamError(err, "mcpproxy: initialize %s", u.url)
	}
	u.log.Debug("mcpproxy: connected", "url", u.url, "protocol", res.ProtocolVersion, "gen", gen)
	return &conn{c: c, gen: gen, version: res.ProtocolVersion}, nil
}

// sessionGone handles a 404 on the connection of generation gen (the
// server forgot the session: a restart), or a GET stream that cannot reach
// the server. The connection is dropped and, unless the Upstream is closed,
// a new one made in the background (with backoff, within ConnectWithin), so
// the GET stream (list_changed) comes back and the tool list is checked
// again. If that fails, the next request connects.
func (u *Upstream) sessionGone(gen int) {
	u.mu.Lock()
	c := u.conn
	u.mu.Unlock()
	if c == nil || c.gen != gen || !u.drop(c) {
		return
	}
	u.log.Info("mcpproxy: the server forgot the MCP session; reconnecting", "url", u.url)
	go func() {
		if c, err := u.acquire(u.life); err == nil {
			u.release(c)
		}
	}()
}

// retryable reports whether a connection attempt may succeed later: the
// server could not be reached, or answered 5xx or 404. Authorization and
// protocol errors are final.
func retryable(err error) bool {
	var authz *transport.AuthorizationRequiredError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &authz):
		return false
	case errors.Is(err, transport.ErrSessionTerminated):
		return true
	}
	return notSent(err) || isTransient(err)
}
