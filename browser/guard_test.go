package browser_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/browser"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/nettest"
)

// newVictim is a local service that counts every connection it accepts:
// what a hostile page would like the browser to reach (an admin port, a
// metadata service).
func newVictim(t *testing.T) *nettest.Service {
	t.Helper()
	return nettest.NewService(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<title>Inside</title>!")
	}))
}

// hostileSite is a website on loopback whose pages send the browser to the
// victim: a redirect, a subresource and a script's fetch.
func hostileSite(t *testing.T, v *nettest.Service) *httptest.Server {
	t.Helper()
	inside := "http://" + v.Addr()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inside+"/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>Page</title><img src="%s/x.png"><script>fetch(%q).catch(()=>{})</script><p>here`, inside, inside+"/api")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// guardFor is the network guard as poppy-mcp gives it to its browser:
// nothing that is not public, except the one local site allowed (as
// poppy-mcp allows its own local pages).
func guardFor(t *testing.T, site *httptest.Server) *netguard.Guard {
	t.Helper()
	u, _ := url.Parse(site.URL)
	return netguard.New(&netguard.Options{Allow: []netip.AddrPort{netip.MustParseAddrPort(u.Host)}})
}

// TestOpenGuarded: with Options.Dial, Chromium reaches only what Dial
// allows. A page on the allowed site that redirects to a local service,
// loads an image from it and fetches from it reaches nothing there. The
// same pages in a browser without Dial do reach it: that is the escape
// (a Company redirect to 169.254.169.254) the proxy closes.
func TestOpenGuarded(t *testing.T) {
	path := chromium(t)
	v := newVictim(t)
	site := hostileSite(t, v)
	guarded, err := browser.New(path, &browser.Options{Dial: guardFor(t, site).DialContext})
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	ctx := context.Background()
	p, err := guarded.Open(ctx, site.URL+"/page", false)
	if err != nil || p.Title != "Page" {
		t.Fatalf("the allowed site through the proxy: %v %+v", err, p)
	}
	if p, err := guarded.Open(ctx, site.URL+"/redirect", false); err == nil && strings.Contains(p.Text, "!") {
		t.Errorf("the redirect landed inside: %+v", p)
	}
	if p, err := guarded.Open(ctx, "http://"+v.Addr()+"/", false); err == nil && p.Title == "Inside" {
		t.Errorf("a loopback URL opened directly: %+v", p)
	}
	if n := v.Connections(); n != 0 {
		t.Fatalf("the guarded browser connected to the local service %d times", n)
	}
	open, err := browser.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Open(ctx, site.URL+"/redirect", false); err != nil {
		t.Fatal(err)
	}
	if v.Connections() == 0 {
		t.Error("without Dial the redirect did not reach the local service either: this test proves nothing")
	}
}

// TestProxyForwards drives the proxy with Go's own client, without
// Chromium: http in absolute form and https through CONNECT go through
// Dial, and what Dial refuses gets one generic 502.
func TestProxyForwards(t *testing.T) {
	v := newVictim(t)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") }))
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	t.Cleanup(tlsSrv.Close)
	allowed := map[string]bool{strings.TrimPrefix(plain.URL, "http://"): true, strings.TrimPrefix(tlsSrv.URL, "https://"): true}
	var dialled atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialled.Add(1)
		if !allowed[addr] {
			return nil, fmt.Errorf("refused %s (connection refused)", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	proxyURL := browser.StartProxyForTest(t, dial)
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	hc := &http.Client{Transport: tr}
	for u, want := range map[string]string{plain.URL + "/": "plain", tlsSrv.URL + "/": "tls"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("%s: %q", u, body)
		}
	}
	resp, err := hc.Get("http://" + v.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), "connection refused") {
		t.Errorf("a refused target: %d %q", resp.StatusCode, body)
	}
	if _, err := hc.Get("https://" + v.Addr() + "/"); err == nil {
		t.Error("a refused CONNECT succeeded")
	}
	if n := v.Connections(); n != 0 || dialled.Load() < 4 {
		t.Errorf("victim accepted %d, dial called %d times", n, dialled.Load())
	}
}

// TestProxyRefusesGuardsProxy: the network guard's own upstream proxy
// (HTTPS_PROXY on loopback), once the guard has sent a request through
// it, is still refused to the browser, in absolute form and through
// CONNECT, with the generic 502: the browser's proxy dials with
// Guard.DialContext, which trusts no proxy. Without Chromium.
func TestProxyRefusesGuardsProxy(t *testing.T) {
	upstream := nettest.NewTunnel(t, func(string) (string, bool) { return "", false })
	proxy := &url.URL{Scheme: "http", Host: upstream.Addr()}
	g := netguard.New(&netguard.Options{
		Proxy: http.ProxyURL(proxy),
		LookupNetIP: func(context.Context, string, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		},
	})
	if resp, err := (&http.Client{Transport: g.Transport()}).Get("https://public.example/"); err == nil {
		resp.Body.Close() // the tunnel has no route: what matters is that it was asked
	}
	if got := upstream.Targets(); len(got) != 1 {
		t.Fatalf("the guard's proxy was asked for %v", got)
	}
	before := upstream.Connections()
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(browser.StartProxyForTest(t, g.DialContext))}}
	resp, err := hc.Get("http://" + upstream.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("the guard's proxy, in absolute form: %d", resp.StatusCode)
	}
	if resp, err := hc.Get("https://" + upstream.Addr() + "/"); err == nil {
		resp.Body.Close()
		t.Error("a CONNECT to the guard's proxy succeeded")
	}
	if n := upstream.Connections() - before; n != 0 {
		t.Errorf("the browser reached the guard's proxy %d times", n)
	}
}
