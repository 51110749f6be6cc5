package netguard

// This file is the Guard: its dialer, the one place a connection to a
// Company is opened, and the check of a target a proxy connects to.

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configure a Guard. The zero value is usable: the policy applies to
// every connection, with the default timeouts and the system's CAs.
type Options struct {
	// Resolve maps a "host:port" as dialled (lower case) to the address to
	// dial instead, like curl's --resolve. A mapped name reaches its address
	// whatever the policy says: this is the explicit escape hatch for
	// development and tests (poppytest's names are mapped to its loopback
	// listener this way). Every other name and every IP literal, mapped to
	// nothing, is dialled through the policy. Nil: no name is mapped.
	Resolve func(hostport string) (addr string, ok bool)
	// Allow lists addresses that may be reached though they are not public:
	// poppy-mcp's own local pages, which its browser opens. Nil: none.
	Allow []netip.AddrPort
	// Proxy chooses the proxy of a request, as http.Transport.Proxy does.
	// The target host is resolved and checked before the proxy is asked to
	// connect to it. A proxy it names is reached wherever it is, but only
	// as the proxy of a request: a URL naming the proxy's own address is
	// judged like any other. Nil: http.ProxyFromEnvironment (HTTPS_PROXY,
	// HTTP_PROXY, NO_PROXY).
	Proxy func(*http.Request) (*url.URL, error)
	// LookupNetIP resolves a name for the check made before asking a proxy.
	// Nil: net.DefaultResolver.LookupNetIP.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// RootCAs are the certificate authorities trusted. Nil: the system's,
	// which include SSL_CERT_FILE.
	RootCAs *x509.CertPool
	// DialMapped connects to the address Resolve maps a name to, in place
	// of a TCP dial: an in-memory network, for tests that run in a
	// testing/synctest bubble (docs/architecture.md, "Time in tests").
	// Nil: TCP.
	DialMapped func(ctx context.Context, network, addr string) (net.Conn, error)

	// Timeouts per phase of a request. None bounds a whole request, so a
	// long-poll or an event stream lasts as long as its context allows.

	// DialTimeout bounds opening a TCP connection. Zero: 10 s.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake. Zero: 10 s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers once
	// the request is sent. It must outlast the longest wait poppy-mcp asks a
	// Company to hold a request open (60 s). Zero: 2 minutes.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout closes a kept-alive connection unused this long.
	// Zero: 90 s.
	IdleConnTimeout time.Duration
}

// Guard opens connections for Company URLs under the address policy. It is
// safe for concurrent use.
type Guard struct {
	opts   Options
	direct *net.Dialer // for mapped names, allowed addresses and a transport's proxy
	public *net.Dialer // for everything else: refuses what is not public
}

// New returns a Guard.
func New(opts *Options) *Guard {
	g := &Guard{}
	if opts != nil {
		g.opts = *opts
	}
	o := &g.opts
	o.Allow = append([]netip.AddrPort(nil), o.Allow...)
	if o.Proxy == nil {
		o.Proxy = http.ProxyFromEnvironment
	}
	if o.LookupNetIP == nil {
		o.LookupNetIP = net.DefaultResolver.LookupNetIP
	}
	o.DialTimeout = orDefault(o.DialTimeout, 10*time.Second)
	o.TLSHandshakeTimeout = orDefault(o.TLSHandshakeTimeout, 10*time.Second)
	o.ResponseHeaderTimeout = orDefault(o.ResponseHeaderTimeout, 2*time.Minute)
	o.IdleConnTimeout = orDefault(o.IdleConnTimeout, 90*time.Second)
	g.direct = &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	g.public = &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	return g
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ErrNotPublic is the reason of every refusal: errors.Is(err, ErrNotPublic)
// tells a refused address from a failed connection.
var ErrNotPublic = errors.New("refused: the address is not public")

// ErrConnect is the reason of every failed connection to an allowed
// address, whatever the network said (refused, reset, unreachable, timed
// out): the difference would tell closed ports from open ones.
var ErrConnect = errors.New("could not connect")

// Error is a refused or failed connection.
type Error struct {
	// Addr is the "host:port" dialled, as the URL named it.
	Addr string
	// Err is ErrNotPublic or ErrConnect.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("netguard: %s: %v", e.Addr, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// DialContext connects to addr ("host:port"): a mapped name to its address,
// an allowed address as it is, and anything else only where the name
// resolves to public addresses, each checked as it is connected to. A
// proxy's address is nothing special here. It fits
// http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	dialer, to := g.public.DialContext, addr
	if mapped, ok := g.mapped(addr); ok {
		dialer, to = g.direct.DialContext, mapped
		if g.opts.DialMapped != nil {
			dialer = g.opts.DialMapped
		}
	} else if ap, err := netip.ParseAddrPort(addr); err == nil && g.allowed(ap) {
		dialer = g.direct.DialContext
	}
	return dial(ctx, dialer, network, addr, to)
}

// dial connects to to with dialer, for addr as the URL named it, and
// says why it could not in one of two words: refused or failed.
func dial(ctx context.Context, dialer func(context.Context, string, string) (net.Conn, error), network, addr, to string) (net.Conn, error) {
	conn, err := dialer(ctx, network, to)
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil:
		return nil, ctx.Err() // the caller's own deadline or cancellation
	case errors.Is(err, ErrNotPublic):
		return nil, &Error{Addr: addr, Err: ErrNotPublic}
	}
	return nil, &Error{Addr: addr, Err: ErrConnect}
}

// mapped returns the address Options.Resolve maps addr to.
func (g *Guard) mapped(addr string) (string, bool) {
	if g.opts.Resolve == nil {
		return "", false
	}
	return g.opts.Resolve(strings.ToLower(addr))
}

func (g *Guard) allowed(ap netip.AddrPort) bool {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for _, a := range g.opts.Allow {
		if netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) == ap {
			return true
		}
	}
	return false
}

// control runs just before each connect(2), with the address actually
// connected to: after DNS, for every address Happy Eyeballs tries.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !Public(ap.Addr()) && !g.allowed(ap) {
		return ErrNotPublic
	}
	return nil
}

// CheckHost resolves hostport's host and refuses it unless it is mapped, or
// every address it resolves to is public or allowed. It is the check made
// before a proxy connects on poppy-mcp's behalf; a direct connection needs
// none, as the dialer checks the address it connects to.
func (g *Guard) CheckHost(ctx context.Context, hostport string) error {
	if _, ok := g.mapped(hostport); ok {
		return nil
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return &Error{Addr: hostport, Err: ErrNotPublic}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return &Error{Addr: hostport, Err: ErrNotPublic}
	}
	ips, err := g.lookup(ctx, host)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil || len(ips) == 0:
		return &Error{Addr: hostport, Err: ErrConnect}
	}
	for _, ip := range ips {
		// Every address: the proxy may connect to any of them.
		if !Public(ip) && !g.allowed(netip.AddrPortFrom(ip, uint16(n))) {
			return &Error{Addr: hostport, Err: ErrNotPublic}
		}
	}
	return nil
}

func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip}, nil
	}
	return g.opts.LookupNetIP(ctx, "ip", host)
}
