package mcpproxy

// This file watches the HTTP traffic of a connection for what mcp-go's
// client leaves to its caller: a 404 on any request of a session means the
// server forgot it (MCP 2025-11-25 "Session Management": "The client MUST
// start a new session by sending a new InitializeRequest"), and a GET stream
// that cannot connect means the server is down (mcp-go would retry it every
// second for as long as the client lives). It also classifies transport
// errors as sent or not.

import (
	"errors"
	"io"
	"net"
	"net/http"
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
	return resp, err
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
