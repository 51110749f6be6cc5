package nettest

// This file is a forward proxy for tests of requests made through
// HTTPS_PROXY: it tunnels CONNECT to where a test routes each target.

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Tunnel is an HTTP proxy on a loopback port that answers CONNECT
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
