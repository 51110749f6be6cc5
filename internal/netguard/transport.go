package netguard

// This file builds the base HTTP transport: the Guard's dialer, the proxy
// check, and a timeout for each phase of a request.

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Transport returns a new HTTP transport that connects through the Guard.
// Every phase has a timeout of its own (dial, TLS handshake, response
// headers, idle connections) and nothing bounds a whole request: give each
// request a context with the deadline it needs. With a proxy, the target
// host is checked before the proxy is asked to connect to it.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 g.proxy,
		DialContext:           g.DialContext,
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

// proxy asks Options.Proxy for the request's proxy. With one, the proxy
// resolves and connects, so the target is checked here first: its name
// must resolve to public addresses only. The proxy itself is then trusted.
func (g *Guard) proxy(r *http.Request) (*url.URL, error) {
	u, err := g.opts.Proxy(r)
	if err != nil || u == nil {
		return u, err
	}
	if err := g.CheckHost(r.Context(), canonicalAddr(r.URL)); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.proxies[canonicalAddr(u)] = true
	g.mu.Unlock()
	return u, nil
}

// canonicalAddr is u's "host:port", lower case, with the scheme's default port.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}
