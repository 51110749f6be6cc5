// Package nettest has local services for tests of what poppy-mcp may
// connect to: each counts the connections it accepts, so a test can prove
// that a refused address saw nothing at all, not even a handshake.
package nettest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
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

// Tunnel is a forward proxy for tests of requests made through
// HTTPS_PROXY: an HTTP proxy on a loopback port that answers CONNECT
// host:port by connecting to the address route gives it, and every other
// request with 400. It counts the connections it accepts (Connections) and
// records the targets it was asked for. It is safe for concurrent use.
type Tunnel struct {
	*Service
	route func(hostport string) (addr string, ok bool)

	// mu guards targets.
	mu      sync.Mutex
	targets []string
}

// NewTunnel starts a Tunnel; it is closed when the test ends.
func NewTunnel(t testing.TB, route func(hostport string) (addr string, ok bool)) *Tunnel {
	t.Helper()
	p := &Tunnel{route: route}
	p.Service = NewService(t, false, http.HandlerFunc(p.serve))
	return p
}

// Targets are the CONNECT targets asked for, in order.
func (p *Tunnel) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *Tunnel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "nettest tunnel: not a CONNECT", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, r.Host)
	p.mu.Unlock()
	addr, ok := p.route(r.Host)
	if !ok {
		http.Error(w, "nettest tunnel: no route", http.StatusBadGateway)
		return
	}
	up, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, "nettest tunnel: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	rw.WriteString("HTTP/1.1 200 Connection Established\r\n\r\n")
	rw.Flush()
	done := make(chan struct{})
	go func() {
		io.Copy(up, rw.Reader) // what the client sent after CONNECT may be buffered in rw
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(down, up)
	down.Close()
	<-done
}
