package tools_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// harness is a complete poppy-mcp (identity, store, agent, pages, tools) in
// front of a poppytest Company, served over streamable HTTP for real MCP
// clients. Everything logged is kept for leak scans.
type harness struct {
	company *poppytest.Server
	tools   *tools.Server
	store   *store.Store
	agent   *auth.Agent
	pages   *pages.Server
	url     string
	logs    *testlog.Buffer
	base    http.RoundTripper // poppy-mcp's base transport, through the network guard
	holds   *retryafter.Holds // shared by the agent and discovery, as serve does
	// local reaches poppy-mcp's own listeners (MCP, pages) for the test's
	// clients: http.DefaultTransport, or the in-memory network's.
	local http.RoundTripper
	net   *memnet.Network // harnessOptions.Net; nil on the loopback network
}

// harnessOptions change how poppy-mcp is built. The zero value builds it
// as serve does.
type harnessOptions struct {
	// DocumentTimeout bounds each public document fetch. Zero: discovery's default.
	DocumentTimeout time.Duration
	// Resolve maps more names, past the network guard, as --resolve does
	// (poppytest's own names are always mapped). Nil: none.
	Resolve func(hostport string) (addr string, ok bool)
	// Companies are more Companies poppy-mcp can reach beside the
	// harness's own: their names are mapped, their CAs trusted and the
	// agent's documents served on their AgentHost. Nil: none.
	Companies []*poppytest.Server
	// Now is poppy-mcp's clock (tools.Options.Now). Nil: time.Now.
	Now func() time.Time
	// Guard changes the network guard's options last (a proxy, a
	// resolver). Nil: none.
	Guard func(*netguard.Options)
	// ReadOnly and Toolsets are tools.Options' (serve --read-only,
	// --toolsets). Zero: every tool.
	ReadOnly bool
	Toolsets tools.Toolsets
	// Net, when set, is the in-memory network every listener of the
	// harness and its Company is on, for a test in a synctest bubble
	// (inBubble). Nil: loopback TCP ports.
	Net *memnet.Network
}

// inBubble runs f in a testing/synctest bubble with an in-memory network
// for its harness (harnessOptions.Net): every wait in it, poppy-mcp's and
// the Company's (poll intervals, Retry-After, leases, long-polls,
// deadlines), passes on the bubble's fake clock as soon as everything in
// the bubble waits, instead of on the wall clock (docs/architecture.md,
// "Time in tests").
func inBubble(t *testing.T, f func(t *testing.T, n *memnet.Network)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { f(t, &memnet.Network{}) })
}

// onNet returns opts with the Company listening on n (nil: as they are).
func onNet(opts *poppytest.Options, n *memnet.Network) *poppytest.Options {
	if n == nil {
		return opts
	}
	var o poppytest.Options
	if opts != nil {
		o = *opts
	}
	o.Listen, o.Dial = n.Listen, n.DialContext
	return &o
}

// newCompany is poppytest.NewServer on n (nil: a loopback port).
func newCompany(t *testing.T, n *memnet.Network, opts *poppytest.Options) *poppytest.Server {
	t.Helper()
	return poppytest.NewServer(t, onNet(opts, n))
}

// localTransport is the transport of a test's own requests to poppy-mcp's
// listeners on n (nil: http.DefaultTransport), closed when the test ends.
func localTransport(t *testing.T, n *memnet.Network) http.RoundTripper {
	if n == nil {
		return http.DefaultTransport
	}
	tr := n.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// testClock is a clock a test moves forward; it is safe for concurrent use.
type testClock struct{ ahead atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *testClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// clientID is where poppytest serves the agent's documents.
const clientID = "https://agent.example/agent.json"

func newHarness(t *testing.T, opts *poppytest.Options) *harness {
	t.Helper()
	return newHarnessWith(t, opts, nil)
}

// newHarnessWith is newHarness with harness options (nil: the defaults).
func newHarnessWith(t *testing.T, opts *poppytest.Options, hopts *harnessOptions) *harness {
	t.Helper()
	if hopts == nil {
		hopts = &harnessOptions{}
	}
	ctx := context.Background()
	company := newCompany(t, hopts.Net, opts)
	st, err := store.Open(ctx, t.TempDir(), &store.Options{Key: bytes.Repeat([]byte{7}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, err := auth.NewIdentity(ctx, clientID, &auth.IdentityOptions{Store: st, ClientName: "poppy-mcp test"})
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, err := id.AgentJSON()
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := id.JWKSJSON()
	if err != nil {
		t.Fatal(err)
	}
	company.SetAgentDocuments(agentJSON, jwks)
	for _, other := range hopts.Companies {
		other.SetAgentDocuments(agentJSON, jwks)
	}
	pg, err := newPages(hopts.Net)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	logs := &testlog.Buffer{}
	// As serve builds it: one guarded base transport, poppytest's names
	// mapped to its listener (as --resolve would), one Holds for every request.
	guard := companyGuard(append([]*poppytest.Server{company}, hopts.Companies...)...)
	if extra, own := hopts.Resolve, guard.Resolve; extra != nil {
		guard.Resolve = func(hp string) (string, bool) {
			if addr, ok := extra(hp); ok {
				return addr, true
			}
			return own(hp)
		}
	}
	if hopts.Net != nil {
		guard.DialMapped = hopts.Net.DialContext
	}
	if hopts.Guard != nil {
		hopts.Guard(guard)
	}
	base, holds := netguard.New(guard).Transport(), &retryafter.Holds{}
	agent := auth.New(id, &auth.Options{HTTPClient: &http.Client{Transport: base}, Store: st, Holds: holds})
	docs := &http.Client{Transport: cache.New(base, nil)}
	ts := tools.New(discovery.New(docs, &discovery.Options{Holds: holds, Timeout: hopts.DocumentTimeout}), &tools.Options{
		Agent: agent, Store: st, Pages: pg,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Now: hopts.Now,
		ReadOnly: hopts.ReadOnly, Toolsets: hopts.Toolsets,
	})
	t.Cleanup(ts.Close)                                         // stops background polling and relays (cleanups run last-in first-out)
	t.Cleanup(func() { ts.ShutdownHTTP(context.Background()) }) // stops the idle sweepers, after hs.Close
	hs := newHTTPServer(ts.HTTPHandler(), hopts.Net)
	t.Cleanup(hs.Close)
	return &harness{company: company, tools: ts, store: st, agent: agent, pages: pg, url: hs.URL + "/mcp", logs: logs,
		base: base, holds: holds, local: localTransport(t, hopts.Net), net: hopts.Net}
}

// newPages is pages.New on n (nil: a loopback port).
func newPages(n *memnet.Network) (*pages.Server, error) {
	if n == nil {
		return pages.New(nil)
	}
	ln, _ := n.Listen()
	return pages.New(&pages.Options{Listener: ln})
}

// newHTTPServer is httptest.NewServer on n (nil: a loopback port).
func newHTTPServer(h http.Handler, n *memnet.Network) *httptest.Server {
	if n == nil {
		return httptest.NewServer(h)
	}
	hs := httptest.NewUnstartedServer(h)
	hs.Listener.Close()
	hs.Listener, _ = n.Listen()
	hs.Start()
	return hs
}

// companyGuard are the network guard's options for poppytest Companies:
// their hosts, at any port, are mapped to their loopback listeners, the way
// --resolve maps a Company under development, and their CAs are trusted.
// Every other name and address stays behind the guard.
func companyGuard(companies ...*poppytest.Server) *netguard.Options {
	pool := x509.NewCertPool()
	for _, c := range companies {
		pool.AppendCertsFromPEM(c.CAPEM())
	}
	return &netguard.Options{
		Resolve: func(hostport string) (string, bool) {
			host, _, err := net.SplitHostPort(hostport)
			if err != nil {
				return "", false
			}
			for _, c := range companies {
				if slices.Contains(c.Hosts(), host) {
					return c.Addr(), true
				}
			}
			return "", false
		},
		RootCAs: pool,
	}
}

// connect opens a session with the official go-sdk client at one revision.
func (h *harness) connect(t *testing.T, revision string) *sdk.ClientSession {
	t.Helper()
	return h.connectWith(t, revision, nil)
}

// connectWith is connect with client options (elicitation handlers, ...).
func (h *harness) connectWith(t *testing.T, revision string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return h.connectClient(t, sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, opts), revision)
}

// connectClient connects the client c at one revision.
func (h *harness) connectClient(t *testing.T, c *sdk.Client, revision string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: h.local}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect at %s: %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != revision {
		t.Fatalf("negotiated %s, want %s", got, revision)
	}
	return cs
}
