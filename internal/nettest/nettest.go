// Package nettest has local services for tests of what poppy-mcp may
// connect to: each counts the connections it accepts, so a test can prove
// that a refused address saw nothing at all, not even a handshake.
package nettest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Service is an HTTP service on a loopback port, plain or TLS, that counts
// the connections it accepts. It is safe for concurrent use.
type Service struct {
	srv   *httptest.Server
	conns atomic.Int64
}

// NewService starts h on 127.0.0.1, with TLS (a certificate nobody trusts)
// when tls is set. It is closed when the test ends.
func NewService(t testing.TB, tls bool, h http.Handler) *Service {
	t.Helper()
	s := &Service{srv: httptest.NewUnstartedServer(h)}
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if tls {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	t.Cleanup(s.srv.Close)
	return s
}

// Addr is the service's "127.0.0.1:port".
func (s *Service) Addr() string { return s.srv.Listener.Addr().String() }

// Connections is how many connections the service has accepted.
func (s *Service) Connections() int64 { return s.conns.Load() }
