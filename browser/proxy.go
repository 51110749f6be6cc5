package browser

// This file is the in-process proxy Chromium is told to use when
// Options.Dial is set: every connection the browser makes (https through
// CONNECT, http in absolute form, loopback included) is opened by Dial, so
// whatever policy Dial applies holds for pages, redirects, scripts and
// subresources alike.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// proxy is an HTTP proxy on 127.0.0.1 that connects through a DialFunc.
type proxy struct {
	ln      net.Listener
	srv     *http.Server
	dial    DialFunc
	forward *httputil.ReverseProxy
	tr      *http.Transport

	// mu guards open, the connections of the tunnels still open, and closed.
	mu     sync.Mutex
	open   map[net.Conn]bool
	closed bool
}

// startProxy listens on a loopback port and serves until close.
func startProxy(dial DialFunc) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, dial: dial, open: map[net.Conn]bool{}}
	p.tr = &http.Transport{DialContext: dial, Proxy: nil, ResponseHeaderTimeout: 2 * time.Minute, IdleConnTimeout: 30 * time.Second}
	p.forward = &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.Host }, // Out.URL is In's absolute URL already
		Transport:    p.tr,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) { refuse(w, err) },
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// url is the proxy's address for --proxy-server.
func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

// close stops the proxy and every tunnel through it.
func (p *proxy) close() {
	_ = p.srv.Close() // this leaves hijacked connections alone
	p.tr.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.open {
		c.Close()
	}
}

// track records c as a tunnel's, to be closed by close. Once the proxy is
// closed, it closes c at once.
func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return
	}
	p.open[c] = true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, c)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.tunnel(w, r)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.forward.ServeHTTP(w, r)
	default:
		http.Error(w, "poppy-mcp's browser proxy: not a proxy request", http.StatusBadRequest)
	}
}

// tunnel answers CONNECT host:port: it dials the target and, once
// connected, copies bytes both ways until either side closes.
func (p *proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := p.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		refuse(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "poppy-mcp's browser proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	for _, c := range []net.Conn{up, down} {
		p.track(c)
		defer p.untrack(c)
	}
	if _, err := rw.WriteString("HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil || rw.Flush() != nil {
		up.Close()
		down.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst net.Conn, src io.Reader) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		done <- struct{}{}
	}
	go pipe(up, rw) // what Chromium sent after CONNECT may already be buffered in rw
	go pipe(down, up)
	<-done
	up.Close()
	down.Close()
	<-done
}

// refuse answers a request whose connection Dial would not or could not
// open, or whose forwarding failed, with one message whatever the reason:
// a page must not learn whether a refused port was closed or open.
func refuse(w http.ResponseWriter, _ error) {
	http.Error(w, "poppy-mcp's browser proxy: the site could not be reached", http.StatusBadGateway)
}
