package netguard

// This file is the HTTP transport over the Guard. A request goes straight
// to its host or through a proxy, each on a transport of its own: the
// direct one dials through the Guard, where a proxy's address is judged
// like any other; each proxy's dials that proxy and nothing else. So a
// proxy is trusted only as the proxy of a request, never as the
// destination a URL names, and a URL naming a proxy on loopback is refused
// before anything is sent to it, the same whether its port is open or
// closed.

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Transport is the HTTP transport for Company URLs: it routes each request
// straight to its host or through the proxy Options.Proxy names, after
// checking the target. It is safe for concurrent use.
type Transport struct {
	g      *Guard
	direct *http.Transport

	// mu guards proxied.
	mu      sync.Mutex
	proxied map[string]*http.Transport // by the proxy's URL
}

// Transport returns a new HTTP transport that connects through the Guard.
// Every phase has a timeout of its own (dial, TLS handshake, response
// headers, idle connections) and nothing bounds a whole request: give each
// request a context with the deadline it needs. With a proxy, the target
// host is checked before the proxy is asked to connect to it.
func (g *Guard) Transport() *Transport {
	return &Transport{g: g, direct: g.httpTransport(nil, g.DialContext), proxied: map[string]*http.Transport{}}
}

// RoundTrip sends r on the transport its route takes. It closes r's body
// when it refuses the request, as an http.RoundTripper must.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt, err := t.route(r)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return rt.RoundTrip(r)
}

// route chooses r's transport. A mapped name is reached directly, at the
// address it is mapped to: it never goes to a proxy. With a proxy, the
// proxy resolves and connects, so the target is checked here first: its
// name must resolve to public addresses only.
func (t *Transport) route(r *http.Request) (http.RoundTripper, error) {
	if r.URL == nil {
		return t.direct, nil // which says what is wrong with r
	}
	target := canonicalAddr(r.URL)
	if _, ok := t.g.mapped(target); ok {
		return t.direct, nil
	}
	u, err := t.g.opts.Proxy(r)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return t.direct, nil
	}
	if err := t.g.CheckHost(r.Context(), target); err != nil {
		return nil, err
	}
	return t.via(u), nil
}

// via is the transport of every request through the proxy u, made on first
// use. Its dialer connects to u's address and nowhere else.
func (t *Transport) via(u *url.URL) *http.Transport {
	key := u.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr := t.proxied[key]; tr != nil {
		return tr
	}
	proxy := canonicalAddr(u)
	tr := t.g.httpTransport(http.ProxyURL(u), func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !strings.EqualFold(addr, proxy) { // never happens: every request of tr goes to u
			return nil, &Error{Addr: addr, Err: ErrNotPublic}
		}
		return dial(ctx, t.g.direct.DialContext, network, addr, addr)
	})
	t.proxied[key] = tr
	return tr
}

// CloseIdleConnections closes the idle connections of every route.
func (t *Transport) CloseIdleConnections() {
	t.direct.CloseIdleConnections()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tr := range t.proxied {
		tr.CloseIdleConnections()
	}
}

// httpTransport is one route's HTTP transport, with the Guard's timeouts
// and CAs, its own TLS configuration (http.Transport writes into it), and
// proxy and dial as given.
func (g *Guard) httpTransport(proxy func(*http.Request) (*url.URL, error), dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:                 proxy,
		DialContext:           dial,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: g.opts.RootCAs},
		TLSHandshakeTimeout:   g.opts.TLSHandshakeTimeout,
		ResponseHeaderTimeout: g.opts.ResponseHeaderTimeout,
		IdleConnTimeout:       g.opts.IdleConnTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   8,
		ForceAttemptHTTP2:     true,
		// A connection that went silent is found by pings and closed, so a
		// stream on it fails instead of hanging.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
	}
}

// canonicalAddr is u's "host:port", lower case, with the scheme's default port.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}
