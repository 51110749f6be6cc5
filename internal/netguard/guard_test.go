package netguard_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/nettest"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestDialRefusesLocal: an IP literal or a name that resolves to loopback
// is refused before any connection is made, with one message whether the
// port is open or closed; the open port's listener sees nothing.
func TestDialRefusesLocal(t *testing.T) {
	open := nettest.NewService(t, false, http.NotFoundHandler())
	_, port, _ := net.SplitHostPort(open.Addr())
	g := netguard.New(nil)
	ctx := context.Background()
	msgs := map[string]string{}
	for _, addr := range []string{open.Addr(), closedPort(t), "localhost:" + port, "[::1]:" + port,
		"[::ffff:127.0.0.1]:" + port, "0.0.0.0:" + port} {
		c, err := g.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected", addr)
		}
		var ge *netguard.Error
		if !errors.Is(err, netguard.ErrNotPublic) || !errors.As(err, &ge) || ge.Addr != addr {
			t.Fatalf("%s: %v, want ErrNotPublic", addr, err)
		}
		msgs[strings.ReplaceAll(err.Error(), addr, "ADDR")] = addr
	}
	if len(msgs) != 1 {
		t.Errorf("the refusals differ: %v", msgs)
	}
	if n := open.Connections(); n != 0 {
		t.Errorf("the listener accepted %d connections", n)
	}
}

// TestDialMappedAndAllowed: a name mapped by Resolve reaches its address,
// and so does an allowed address; nothing else does.
func TestDialMappedAndAllowed(t *testing.T) {
	mappedTo, allowed := nettest.NewService(t, false, http.NotFoundHandler()), nettest.NewService(t, false, http.NotFoundHandler())
	g := netguard.New(&netguard.Options{
		Resolve: func(hp string) (string, bool) {
			if hp == "company.test:443" {
				return mappedTo.Addr(), true
			}
			return "", false
		},
		Allow: []netip.AddrPort{netip.MustParseAddrPort(allowed.Addr())},
	})
	ctx := context.Background()
	for _, addr := range []string{"Company.test:443", allowed.Addr()} {
		c, err := g.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		c.Close()
	}
	if _, err := g.DialContext(ctx, "tcp", "company.test:444"); !errors.Is(err, netguard.ErrConnect) && !errors.Is(err, netguard.ErrNotPublic) {
		t.Errorf("an unmapped port of a mapped name: %v", err)
	}
	if _, err := g.DialContext(ctx, "tcp", mappedTo.Addr()); !errors.Is(err, netguard.ErrNotPublic) {
		t.Errorf("the mapped address itself, as a literal: %v", err)
	}
}

// TestDialFailureIsGeneric: a connection that fails says only that it
// failed, not how (here a mapped name whose port is closed).
func TestDialFailureIsGeneric(t *testing.T) {
	closed := closedPort(t)
	g := netguard.New(&netguard.Options{Resolve: func(string) (string, bool) { return closed, true }})
	_, err := g.DialContext(context.Background(), "tcp", "company.test:443")
	if !errors.Is(err, netguard.ErrConnect) || err.Error() != "netguard: company.test:443: could not connect" {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.DialContext(ctx, "tcp", "company.test:443"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled dial: %v, want the context's error", err)
	}
}

// connectProxy is an HTTP proxy that records the CONNECT requests it gets
// and refuses them all.
type connectProxy struct {
	mu      sync.Mutex
	targets []string
}

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.targets = append(p.targets, r.Method+" "+r.Host)
	p.mu.Unlock()
	http.Error(w, "no", http.StatusBadGateway)
}

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// TestProxyChecksTarget: with a proxy (HTTPS_PROXY), the target is resolved
// and checked before the proxy is asked; the proxy, itself on loopback, is
// reached for a target whose every address is public; a mapped name is not
// proxied at all.
func TestProxyChecksTarget(t *testing.T) {
	p := &connectProxy{}
	ps := httptest.NewServer(p)
	t.Cleanup(ps.Close)
	pu, _ := url.Parse(ps.URL)
	company := nettest.NewService(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "direct") }))
	g := netguard.New(&netguard.Options{
		Proxy:   http.ProxyURL(pu),
		Resolve: func(hp string) (string, bool) { return company.Addr(), hp == "mapped.test:80" },
		LookupNetIP: func(_ context.Context, _, host string) ([]netip.Addr, error) {
			switch host {
			case "rebind.test": // one public answer beside a private one
				return []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.1")}, nil
			case "public.test":
				return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
	})
	hc := &http.Client{Transport: g.Transport()}
	for _, u := range []string{"https://169.254.169.254/latest/meta-data/", "https://127.0.0.1:6443/", "https://rebind.test/",
		"https://[::1]/", "https://missing.test/"} {
		resp, err := hc.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: answered %d", u, resp.StatusCode)
		}
		if !errors.Is(err, netguard.ErrNotPublic) && !errors.Is(err, netguard.ErrConnect) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if got := p.seen(); len(got) != 0 {
		t.Fatalf("the proxy was asked for %v", got)
	}
	resp, err := hc.Get("https://public.test/")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := p.seen(); len(got) != 1 || got[0] != "CONNECT public.test:443" {
		t.Errorf("the proxy saw %v, want one CONNECT public.test:443", got)
	}
	// A name mapped as --resolve maps it goes straight to its address.
	resp, err = hc.Get("http://mapped.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "direct" || len(p.seen()) != 1 {
		t.Errorf("a mapped name: %q, the proxy saw %v", body, p.seen())
	}
}

// TestTransportPhases: a server that never sends its headers is cut by the
// response-header timeout, while a response whose headers came and whose
// body takes longer than that (a long-poll, a stream) is not: there is no
// whole-request timeout.
func TestTransportPhases(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/silent", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range 4 {
			fmt.Fprintf(w, "event %d\n", i)
			rc.Flush()
			select {
			case <-time.After(150 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	g := netguard.New(&netguard.Options{
		Resolve:               func(string) (string, bool) { return addr, true },
		ResponseHeaderTimeout: 200 * time.Millisecond,
	})
	hc := &http.Client{Transport: g.Transport()}
	if resp, err := hc.Get("http://company.test/silent"); err == nil {
		resp.Body.Close()
		t.Fatal("a server that sends no headers held the request")
	}
	resp, err := hc.Get("http://company.test/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || strings.Count(string(body), "event") != 4 {
		t.Errorf("the stream was cut: %q %v", body, err)
	}
}

// envLikeProxy routes every request through proxy except those to
// loopback and localhost, as http.ProxyFromEnvironment does with
// HTTPS_PROXY set (which reads the environment once per process, so
// tests cannot set it).
func envLikeProxy(proxy *url.URL) func(*http.Request) (*url.URL, error) {
	return func(r *http.Request) (*url.URL, error) {
		host := r.URL.Hostname()
		if ip, err := netip.ParseAddr(host); host == "localhost" || err == nil && ip.IsLoopback() {
			return nil, nil
		}
		return proxy, nil
	}
}

// TestProxyIsNoDestination: once poppy-mcp has used a proxy on loopback,
// the proxy's address is still refused as a destination, through the
// transport (a URL naming it, which the proxy setting sends direct) and
// through DialContext (what the browser's own proxy dials with), before
// anything reaches it, with the refusal a closed port gets. Requests
// through the proxy still work.
func TestProxyIsNoDestination(t *testing.T) {
	company := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "through") }))
	t.Cleanup(company.Close)
	companyAddr := strings.TrimPrefix(company.URL, "https://")
	tunnel := nettest.NewTunnel(t, func(hp string) (string, bool) { return companyAddr, hp == "example.com:443" })
	pu := &url.URL{Scheme: "http", Host: tunnel.Addr()}
	roots := x509.NewCertPool()
	roots.AddCert(company.Certificate())
	g := netguard.New(&netguard.Options{
		Proxy:   envLikeProxy(pu),
		RootCAs: roots,
		LookupNetIP: func(_ context.Context, _, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		},
	})
	hc := &http.Client{Transport: g.Transport()}
	if body := get(t, hc, "https://example.com/"); body != "through" || len(tunnel.Targets()) != 1 {
		t.Fatalf("through the proxy: %q, the proxy saw %v", body, tunnel.Targets())
	}
	before := tunnel.Connections()
	_, port, _ := net.SplitHostPort(tunnel.Addr())
	msgs := map[string]string{}
	for _, addr := range []string{tunnel.Addr(), "localhost:" + port, closedPort(t)} {
		resp, err := hc.Get("https://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: answered %d", addr, resp.StatusCode)
		}
		if !errors.Is(err, netguard.ErrNotPublic) {
			t.Errorf("%s: %v, want ErrNotPublic", addr, err)
		}
		msgs[strings.ReplaceAll(err.Error(), addr, "ADDR")] = addr
		if c, err := g.DialContext(context.Background(), "tcp", addr); !errors.Is(err, netguard.ErrNotPublic) {
			if c != nil {
				c.Close()
			}
			t.Errorf("DialContext %s: %v, want ErrNotPublic", addr, err)
		}
	}
	if len(msgs) != 1 {
		t.Errorf("the refusals differ, open port or closed: %v", msgs)
	}
	if n := tunnel.Connections(); n != before {
		t.Errorf("the proxy was reached %d more times as a destination", n-before)
	}
	if body := get(t, hc, "https://example.com/again"); body != "through" {
		t.Errorf("through the proxy after the refusals: %q", body)
	}
}

func get(t *testing.T, hc *http.Client, u string) string {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
