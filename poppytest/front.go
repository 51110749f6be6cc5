package poppytest

// This file is the Front: the one TLS listener and certificate authority in
// front of one or more Servers. A Server started without Options.Front makes
// a Front of its own, with its own CA, as httptest.NewTLSServer does; several
// Servers given one Front (poppytest serve runs a Company per test run) share
// its listener and CA, each with a leaf of its own chosen by SNI, and each
// request goes to the Server that serves its Host.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// FrontOptions configure a Front. The zero value is usable.
type FrontOptions struct {
	// Addr is where the Front listens. Zero: "127.0.0.1:0", a free
	// loopback port.
	Addr string
}

// Front is one TLS listener and one certificate authority shared by
// Servers (Options.Front). Each host belongs to at most one of them at a
// time: a Server takes its hosts at Start and gives them back at Close. A
// request for a host no Server has gets 421 Misdirected Request, and a TLS
// handshake naming one fails. Its methods are safe for concurrent use.
type Front struct {
	ca       *certAuthority
	listener net.Listener
	srv      *http.Server
	own      *Server // the only Server of a Front it made itself; nil for NewFront's

	// mu guards hosts and closed.
	mu     sync.Mutex
	hosts  map[string]*Server
	closed bool
}

// NewFront starts a Front with a new certificate authority. Close it when
// done; the Servers on it need their own Close too.
func NewFront(opts *FrontOptions) (*Front, error) {
	var o FrontOptions
	if opts != nil {
		o = *opts
	}
	ca, err := newCertAuthority("poppytest CA", time.Now())
	if err != nil {
		return nil, fmt.Errorf("poppytest: %w", err)
	}
	addr := orDefault(o.Addr, "127.0.0.1:0")
	return startFront(func() (net.Listener, error) { return net.Listen("tcp", addr) }, ca, nil)
}

// startFront serves TLS with leaves issued by ca on what listen returns.
// own is the only Server of a Front made for it, or nil.
func startFront(listen func() (net.Listener, error), ca *certAuthority, own *Server) (*Front, error) {
	ln, err := listen()
	if err != nil {
		return nil, fmt.Errorf("poppytest: %w", err)
	}
	f := &Front{ca: ca, listener: ln, own: own, hosts: map[string]*Server{}}
	f.srv = &http.Server{
		Handler: f,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12,
			GetCertificate: f.certificate},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // handshake errors of clients under test are theirs to report
	}
	go func() { _ = f.srv.ServeTLS(ln, "", "") }()
	return f, nil
}

// Addr is the "127.0.0.1:PORT" address of the Front's listener.
func (f *Front) Addr() string { return f.listener.Addr().String() }

// CAPEM is the PEM encoding of the Front's CA certificate, for SSL_CERT_FILE.
func (f *Front) CAPEM() []byte { return append([]byte(nil), f.ca.pem...) }

// CertPool returns a new pool holding only the Front's CA.
func (f *Front) CertPool() *x509.CertPool { return f.ca.pool.Clone() }

// Hosts lists the hosts the Front's Servers serve now, sorted.
func (f *Front) Hosts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.hosts))
	for h := range f.hosts {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// Serves reports whether a Server on the Front serves host now.
func (f *Front) Serves(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts[hostOnly(host)] != nil
}

// Close stops listening and closes every connection. Requests in flight
// see their context canceled.
func (f *Front) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	_ = f.srv.Close()
}

// errHostTaken is returned when a host belongs to another Server.
var errHostTaken = errors.New("is served by another Server on the Front")

// take gives hosts to s, all or none.
func (f *Front) take(s *Server, hosts ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("the Front is closed")
	}
	for _, h := range hosts {
		if other := f.hosts[h]; other != nil && other != s {
			return fmt.Errorf("host %s %w", h, errHostTaken)
		}
	}
	for _, h := range hosts {
		f.hosts[h] = s
	}
	return nil
}

// release takes every host of s back. After it returns, no new request
// reaches s.
func (f *Front) release(s *Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for h, owner := range f.hosts {
		if owner == s {
			delete(f.hosts, h)
		}
	}
}

// certificate is the leaf of the Server that serves the name the client
// asks for (SNI).
func (f *Front) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	s := f.hosts[hostOnly(hello.ServerName)]
	if s == nil {
		s = f.own
	}
	f.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("poppytest: no Server serves %q", hello.ServerName)
	}
	return &s.tls.leaf, nil
}

// ServeHTTP hands the request to the Server of its Host, with a context
// that ends when that Server closes.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := hostOnly(r.Host)
	f.mu.Lock()
	s := f.hosts[host]
	if s != nil {
		s.inflight.Add(1) // under mu, so Close's Wait follows every Add
	}
	f.mu.Unlock()
	if s == nil {
		http.Error(w, "poppytest: no such host "+host, http.StatusMisdirectedRequest)
		return
	}
	defer s.inflight.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	s.ServeHTTP(w, r.WithContext(ctx))
}
