package tools_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/nettest"
	"github.com/poppy-mcp/poppy-mcp/internal/textonly"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// hostileNetworkCases are the hostile-Company cases of this group (see
// TestHostileCompany): a Company that points poppy-mcp at the machine's own
// network, sends slowly, redirects through plain http or rate limits its
// documents.
func hostileNetworkCases() []hostileCase {
	var plain *nettest.Service // the http hop of the redirect case
	return []hostileCase{
		{
			// A servers entry on loopback, where a real TLS service listens:
			// call_api would be a way into it (and, through its errors, a port
			// scanner). The guard refuses before connecting: the service
			// sees nothing. Without it, call_api reaches the service.
			name: "private-address servers entry",
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				inside := newLocalService(t, true)
				text := callWithServer(t, h, cs, "https://"+inside.Addr())
				if !strings.Contains(text, "refused: the address is not public") || strings.Contains(text, "connection refused") {
					t.Errorf("call_api: %s", text)
				}
				if n := inside.Connections(); n != 0 {
					t.Errorf("the local service was reached %d times", n)
				}
			},
		},
		proxyAsDestinationCase(),
		{
			// The cloud metadata address: refused the same way, at once.
			name: "metadata-address servers entry",
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				text := callWithServer(t, h, cs, "https://169.254.169.254/latest")
				if !strings.Contains(text, "169.254.169.254:443: refused: the address is not public") {
					t.Errorf("call_api: %s", text)
				}
			},
		},
		{
			// The OpenAPI document decides where tokens go: it is fetched only
			// through https redirects, as discovery's documents are. The plain
			// http hop (which would redirect back to https) is never asked.
			name: "http redirect of the OpenAPI document",
			harness: func(t *testing.T) *harnessOptions {
				plain = newLocalService(t, false)
				return &harnessOptions{Resolve: resolveAs(plain, "plain.example.net:80")}
			},
			setup: func(t *testing.T, h *harness) {
				h.company.SetDocument("api.example.com", "/openapi.json", http.StatusFound,
					http.Header{"Location": {"http://plain.example.net/openapi.json"}}, nil)
			},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				_, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
				apis, _ := got["apis"].([]any)
				if len(apis) != 1 || !strings.Contains(fmt.Sprint(apis[0]), "redirected to a URL that is not HTTPS (http://plain.example.net/openapi.json)") {
					t.Errorf("list_api_operations: %v", got)
				}
				if n := plain.Connections(); n != 0 {
					t.Errorf("the plain http hop was asked %d times", n)
				}
			},
		},
		{
			// A body sent a byte at a time cannot hold discovery: the fetch
			// has a deadline of its own, and says so.
			name:    "slow body of poppy.json",
			harness: func(*testing.T) *harnessOptions { return &harnessOptions{DocumentTimeout: time.Second} },
			setup: func(t *testing.T, h *harness) {
				h.company.SlowBody("example.com", "/.well-known/poppy.json", 100*time.Millisecond)
			},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
				if !res.IsError || got["error"] != "unreachable" || !strings.Contains(textOf(res), "did not arrive in time") {
					t.Errorf("discover_company: %v %s", got, textOf(res))
				}
			},
		},
		{
			name:    "slow body of the OpenAPI document",
			harness: func(*testing.T) *harnessOptions { return &harnessOptions{DocumentTimeout: time.Second} },
			setup: func(t *testing.T, h *harness) {
				h.company.SlowBody("api.example.com", "/openapi.json", 100*time.Millisecond)
			},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				_, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
				if apis, _ := got["apis"].([]any); len(apis) != 1 || !strings.Contains(fmt.Sprint(apis[0]), "did not arrive in time") {
					t.Errorf("list_api_operations: %v", got)
				}
			},
		},
		{
			// Poppy 0.1 §4.3: a 429 on poppy.json holds it. The tool says when
			// to come back, and until then nothing is sent: not by
			// discover_company, not by a tool that needs a Session.
			name: "429 on discovery",
			setup: func(t *testing.T, h *harness) {
				h.company.RateLimit("example.com", "/.well-known/poppy.json", 1, 2*time.Minute)
			},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				for range 2 {
					res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
					secs, _ := got["retry_after_seconds"].(float64)
					if !res.IsError || got["error"] != "rate_limited" || secs < 60 || secs > 120 || !strings.Contains(textOf(res), "again in") {
						t.Errorf("discover_company: %v %s", got, textOf(res))
					}
				}
				if _, got := call(t, cs, "start_session", map[string]any{"domain": "example.com"}); got["error"] != "rate_limited" {
					t.Errorf("start_session: %v", got)
				}
				if n, served := h.company.Count("example.com", "/.well-known/poppy.json"), h.company.Served("rate_limited"); n != 1 || served != 1 {
					t.Errorf("poppy.json was asked %d times (%d answered 429), want once", n, served)
				}
			},
		},
		{
			name: "429 on the OpenAPI document",
			setup: func(t *testing.T, h *harness) {
				h.company.RateLimit("api.example.com", "/openapi.json", 1, 2*time.Minute)
			},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				for range 2 {
					_, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
					if apis, _ := got["apis"].([]any); len(apis) != 1 || !strings.Contains(fmt.Sprint(apis[0]), "rate limited: retry after") {
						t.Errorf("list_api_operations: %v", got)
					}
				}
				if n := h.company.Count("api.example.com", "/openapi.json"); n != 1 {
					t.Errorf("the OpenAPI document was asked %d times, want once", n)
				}
			},
		},
		{
			// poppy-mcp's own Chromium follows a Company page's redirect to a
			// local service: its connections go through the same guard, so
			// the service sees nothing. (A Company without a website join, so
			// the browser goes straight to the page.)
			name: "browse_page redirected to a local service",
			opts: &poppytest.Options{PoppyJSON: func(doc map[string]any) { delete(doc, "web") }},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				inside := newLocalService(t, true)
				h.company.HandleFunc("example.com", "GET /leave", func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, "https://"+inside.Addr()+"/latest/meta-data/", http.StatusFound)
				})
				hb := withBrowser(t, h)
				res, got := call(t, hb.connect(t, revisions[len(revisions)-1]), "browse_page", map[string]any{"domain": "example.com", "url": "/leave"})
				if !res.IsError {
					t.Errorf("browse_page: %v", got)
				}
				if n := inside.Connections(); n != 0 {
					t.Errorf("the browser reached the local service %d times", n)
				}
			},
		},
	}
}

// proxyAsDestinationCase: poppy-mcp reaches the Company through a proxy
// on loopback (as with HTTPS_PROXY, which sends loopback URLs direct), and
// then the Company names the proxy's own address as its API's servers
// entry. The proxy is trusted only as the proxy of a request: the call is
// refused before anything reaches it, as any loopback address is.
func proxyAsDestinationCase() hostileCase {
	var tunnel *nettest.Tunnel
	var company atomic.Pointer[string] // where the proxy tunnels example.com to
	return hostileCase{
		name: "servers entry naming the proxy",
		harness: func(t *testing.T) *harnessOptions {
			tunnel = nettest.NewTunnel(t, func(hp string) (string, bool) {
				if addr := company.Load(); addr != nil && hp == "example.com:443" {
					return *addr, true
				}
				return "", false
			})
			return &harnessOptions{Guard: func(o *netguard.Options) { viaProxy(o, "example.com:443", tunnel.Addr()) }}
		},
		setup: func(t *testing.T, h *harness) {
			addr := h.company.Addr()
			company.Store(&addr)
			doc := getJSON(t, h, "https://api.example.com/openapi.json")
			doc["servers"] = []any{map[string]any{"url": "https://" + tunnel.Addr()}}
			setJSON(t, h, "api.example.com", "/openapi.json", doc)
		},
		run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
			if res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"}); res.IsError {
				t.Fatalf("discover_company through the proxy: %v %s", got, textOf(res))
			}
			if !slices.Contains(tunnel.Targets(), "example.com:443") {
				t.Fatalf("the proxy was asked for %v", tunnel.Targets())
			}
			before := tunnel.Connections()
			res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts"})
			if text := textOf(res); !res.IsError || !strings.Contains(text, tunnel.Addr()+": refused: the address is not public") {
				t.Errorf("call_api to the proxy's address: %v %s", got, text)
			}
			if n := tunnel.Connections() - before; n != 0 {
				t.Errorf("the proxy was reached %d times as a destination", n)
			}
		},
	}
}

// viaProxy sends hostport (unmapped) through the proxy at proxyAddr, as
// HTTPS_PROXY would, with loopback URLs direct as Go's proxy setting
// sends them; hostport's name resolves to a public address.
func viaProxy(o *netguard.Options, hostport, proxyAddr string) {
	own := o.Resolve
	o.Resolve = func(hp string) (string, bool) {
		if hp == hostport {
			return "", false
		}
		return own(hp)
	}
	o.Proxy = func(r *http.Request) (*url.URL, error) {
		if ip, err := netip.ParseAddr(r.URL.Hostname()); err == nil && ip.IsLoopback() {
			return nil, nil
		}
		return &url.URL{Scheme: "http", Host: proxyAddr}, nil
	}
	o.LookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
	}
}

// callWithServer serves the store API's document with servers naming
// server, and calls one of its operations; it returns the result's text.
func callWithServer(t *testing.T, h *harness, cs *sdk.ClientSession, server string) string {
	t.Helper()
	doc := getJSON(t, h, "https://api.example.com/openapi.json")
	doc["servers"] = []any{map[string]any{"url": server}}
	setJSON(t, h, "api.example.com", "/openapi.json", doc)
	res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts"})
	if !res.IsError {
		t.Errorf("call_api to %s succeeded: %v", server, got)
	}
	return textOf(res)
}

// textOf is all of res's text: the summary, then the structured content as JSON.
func textOf(res *sdk.CallToolResult) string { return textonly.Text(res) }

// newLocalService is a service on loopback (TLS or plain) that counts the
// connections it accepts: what a hostile Company would like poppy-mcp to
// reach. Asked anything, it redirects to the Company's OpenAPI document.
func newLocalService(t *testing.T, tls bool) *nettest.Service {
	t.Helper()
	return nettest.NewService(t, tls, http.RedirectHandler("https://api.example.com/openapi.json", http.StatusFound))
}

// resolveAs maps name ("host:port") to the service, as --resolve would.
func resolveAs(s *nettest.Service, name string) func(string) (string, bool) {
	return func(hp string) (string, bool) { return s.Addr(), hp == name }
}
