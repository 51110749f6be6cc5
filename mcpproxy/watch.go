package mcpproxy

// This file watches the HTTP traffic of a connection for what mcp-go's
// client leaves to its caller: a 404 on any request of a session means the
// server forgot it (MCP 2025-11-25 "Session Management": "The client MUST
// start a new session by sending a new InitializeRequest"), and a GET stream
// that cannot connect means the server is down (mcp-go would retry it every
// second for as long as the client lives). It also classifies transport
// errors as sent or not, and bounds what the server's answers may make us
// read: the server is the Company's, and its bytes are untrusted.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"
)

// watcher wraps a connection's RoundTripper. It reads nothing of the
// request but its method and session header, and changes nothing.
type watcher struct {
	base http.RoundTripper
	gone func() // the server forgot the session
	down func() // the GET stream cannot reach the server
}

func (w *watcher) RoundTrip(req *http.Request) (*http.Response, error) {
	method, session := req.Method, req.Header.Get(transport.HeaderKeySessionID)
	resp, err := w.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusNotFound && session != "" && method != http.MethodDelete {
		w.gone()
	}
	if err != nil && method == http.MethodGet && notSent(err) {
		w.down()
	}
	if err == nil {
		limitBody(req.Context(), resp)
	}
	return resp, err
}

// Limits on what an answer may make us read. mcp-go reads an error body
// whole into its error and decodes a result without a limit; past these
// the body fails with errTooLarge, and the request with it.
const (
	// maxErrorBody bounds the body of an answer that is not 2xx: a
	// JSON-RPC error, or a page whose start is enough to say what failed.
	maxErrorBody = 64 << 10
	// maxMessageBytes bounds a 2xx body, and each event of an event stream
	// (a GET stream lives for hours: its total is not bounded, its events are).
	maxMessageBytes = 8 << 20
)

var errTooLarge = errors.New("mcpproxy: the server's answer is too large")

// cutKey carries, in a request's context, an *atomic.Bool that limitBody
// sets when it cuts the answer, so send can say why a request failed (mcp-go
// loses the read error of an event stream).
type cutKey struct{}

// limitBody puts a limit on resp.Body.
func limitBody(ctx context.Context, resp *http.Response) {
	b := &limitedBody{ReadCloser: resp.Body, max: maxErrorBody}
	b.cut, _ = ctx.Value(cutKey{}).(*atomic.Bool)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		b.max = maxMessageBytes
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		b.events = mt == "text/event-stream"
	}
	resp.Body = b
}

// limitedBody fails a read past max bytes: of the whole body, or with events
// set, of one server-sent event (bytes since the last blank line).
type limitedBody struct {
	io.ReadCloser
	max    int64
	events bool
	cut    *atomic.Bool // set on a cut; may be nil

	n       int64 // bytes counted against max
	newline bool  // the last byte but '\r' was '\n'
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.n > b.max {
		return 0, errTooLarge
	}
	n, err := b.ReadCloser.Read(p)
	if !b.events {
		b.n += int64(n)
	}
	for i := 0; b.events && i < n && b.n <= b.max; i++ {
		switch c := p[i]; {
		case c == '\n' && b.newline: // a blank line ends an event
			b.n = 0
		case c == '\n':
			b.newline = true
			b.n++
		case c != '\r':
			b.newline = false
			b.n++
		}
	}
	if b.n > b.max {
		if b.cut != nil {
			b.cut.Store(true)
		}
		return 0, fmt.Errorf("%w: more than %d bytes", errTooLarge, b.max)
	}
	return n, err
}

// notSent reports whether err means the request never reached the server:
// it could not connect. Such a request may be sent again.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// isTransient reports whether err is a network failure that may pass: a
// broken or reset connection, a timeout.
func isTransient(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
