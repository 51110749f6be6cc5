package poppytest

// This file starts and stops the Server: its listener (its own Front, or a
// shared one), the hosts it takes there, the end of the requests in flight,
// and the transport that reaches it.

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// lifecycle is the Server's concern of starting and stopping. Its fields
// are guarded by the Server's mu, but those set once by NewUnstartedServer.
type lifecycle struct {
	*Server
	started bool // set once, by Start
	closed  bool // set once, by Close

	front   *Front             // set by Start, or by NewUnstartedServer from Options.Front
	ca      *certAuthority     // the Server's own CA; nil on a shared Front
	life    context.Context    // ends at Close: requests in flight see it
	endLife context.CancelFunc // ends life

	transport *http.Transport // set once by NewUnstartedServer
	client    *http.Client    // set once by NewUnstartedServer
	inflight  sync.WaitGroup  // requests the Front is handing to the Server
}

// Start starts serving: on a loopback port of its own, or on Options.Front,
// taking the hosts it serves there (AgentHost only once it serves something
// there, so Servers sharing a Front can share an agent's host that none of
// them serves). It panics if the Server has already been started or closed,
// if it cannot listen, or if another Server on the Front has one of its hosts.
func (s *lifecycle) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		panic("poppytest: Start on a started or closed Server")
	}
	if s.front == nil {
		f, err := startFront(s.listen, s.ca, s.Server)
		if err != nil {
			panic(err.Error())
		}
		s.front = f
	}
	var hosts []string
	for _, h := range s.hosts {
		if s.takesLocked(h) {
			hosts = append(hosts, h)
		}
	}
	if err := s.front.take(s.Server, hosts...); err != nil {
		panic("poppytest: Start: " + err.Error())
	}
	s.started = true
}

// takesLocked reports whether the Server takes host on its Front: every host
// on its own Front, and on a shared one every host but an AgentHost that
// serves nothing. The caller holds mu.
func (s *lifecycle) takesLocked(host string) bool {
	return s.ca != nil || host != s.agentHost || len(s.handlers[host]) > 0
}

// Close stops the Server: it gives its hosts back to the Front (closing the
// Front if it is its own, with every connection), ends the requests in
// flight, then waits for their handlers to return. Violations found after
// Close are recorded but no longer reported to T. Close may be called more
// than once.
func (s *lifecycle) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	started := s.started
	s.mu.Unlock()
	s.transport.CloseIdleConnections()
	if !started {
		s.endLife()
		return
	}
	s.front.release(s.Server)
	s.endLife()
	if s.front.own == s.Server {
		s.front.Close()
	}
	s.inflight.Wait()
}

// listen is where a Server's own Front listens: Options.Listen's
// listener, or a free loopback port.
func (s *lifecycle) listen() (net.Listener, error) {
	if s.opts.Listen != nil && s.opts.Dial != nil {
		return s.opts.Listen()
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// Addr is the "127.0.0.1:PORT" address of the Server's TLS listener, its
// Front's. It is empty before Start.
func (s *lifecycle) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return ""
	}
	return s.front.Addr()
}

// newTransport returns a transport that trusts only the Server's CA and dials
// every name the certificate covers, at any port, to the listener.
func (s *lifecycle) newTransport() *http.Transport {
	dial := (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	if s.opts.Listen != nil && s.opts.Dial != nil {
		dial = s.opts.Dial
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(hostport)
			if err != nil {
				return nil, err
			}
			if !s.tls.covers(strings.ToLower(host)) {
				return nil, errors.New("poppytest: transport does not dial " + host)
			}
			addr := s.Addr()
			if addr == "" {
				return nil, errors.New("poppytest: server not started")
			}
			return dial(ctx, network, addr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: s.tls.pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
}

// Transport returns the Server's shared transport: it trusts only the
// Server's CA and dials any of its hosts, at any port, to the listener. Clone
// it before changing it. It is nil before Start.
func (s *lifecycle) Transport() *http.Transport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transport
}

// Client returns an *http.Client over Transport, with the default redirect
// policy. It is nil before Start.
func (s *lifecycle) Client() *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}
