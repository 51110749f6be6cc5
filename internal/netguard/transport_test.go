package netguard_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/nettest"
)

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
