// Package memnet is an in-memory network for tests that run in a
// testing/synctest bubble (docs/architecture.md, "Time in tests"). A
// goroutine reading a real socket is not durably blocked, so the bubble's
// fake clock would never move while a server waits for its next request;
// a goroutine waiting on a memnet connection is (it waits on a sync.Cond),
// so the clock moves as soon as everything in the bubble waits.
//
// A Network hands out listeners at "127.0.0.1:PORT" addresses that no real
// socket holds, and dials them. Connections are buffered both ways, so a
// write never waits for the peer to read, and they keep deadlines as
// net.Conn requires, on the bubble's clock.
package memnet

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// firstPort is the first port a Network gives out; ports count up from it.
// It is high and unusual so that a test dialling a memnet address over the
// real network by mistake is refused rather than reaching something.
const firstPort = 61000

// Network is a set of in-memory listeners, each at its own address. The
// zero value is ready to use; it is safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener // by address; guarded by mu
	next      int                  // the last port given out, minus firstPort; guarded by mu
}

// Listen returns a new listener at an address of its own. It never fails;
// the error is there so that Listen fits where net.Listen did.
func (n *Network) Listen() (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[string]*Listener{}
	}
	n.next++
	l := &Listener{n: n, addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: firstPort + n.next},
		conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[l.addr.String()] = l
	return l, nil
}

// DialContext connects to the listener at addr, as net.Dialer.DialContext
// does: it fails with ECONNREFUSED when no open listener is there, and
// waits for the listener to accept until ctx ends.
func (n *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Addr: fakeAddr(addr), Err: syscall.ECONNREFUSED}
	if l == nil {
		return nil, refused
	}
	client, server := Pipe(fakeAddr("127.0.0.1:1"), l.addr)
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, refused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Transport returns a new HTTP transport that dials only the Network.
// Close its idle connections (or close the servers) before a bubble ends:
// a kept-alive connection waits for ever otherwise.
func (n *Network) Transport() *http.Transport {
	return &http.Transport{DialContext: n.DialContext, ForceAttemptHTTP2: true}
}

func (n *Network) remove(l *Listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.listeners, l.addr.String())
}

// Listener is a net.Listener on a Network.
type Listener struct {
	n     *Network
	addr  *net.TCPAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Accept waits for the next connection, or for Close.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops the listener: Accept returns and dialling its address is
// refused. Connections already made stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.remove(l)
	})
	return nil
}

// Addr is the listener's "127.0.0.1:PORT".
func (l *Listener) Addr() net.Addr { return l.addr }

// fakeAddr is an address given as a string.
type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }
