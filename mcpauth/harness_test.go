package mcpauth_test

// This file is the tests' deployment: a real authorization server
// (internal/oidctest, zitadel/oidc's OpenID Provider) and a second one for
// tokens of another issuer, a Resource that reaches them through the
// network guard as poppy-mcp does, and an MCP server behind Resource.Require
// on a TLS listener reached as https://agent.test.

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// resourceURL is the MCP endpoint's public URL in these tests.
const resourceURL = "https://agent.test/mcp"

// The clients registered at the authorization servers.
const (
	mcpClient      = "mcp-client"       // its tokens are for resourceURL
	plainClient    = "plain-client"     // its tokens' aud is its client ID
	elsewhere      = "elsewhere-client" // its tokens are for another MCP server
	otherResource  = "https://other.test/mcp"
	clientRedirect = "https://client.test/callback"
)

// deployment is one protected MCP server and its authorization servers.
type deployment struct {
	idp, other *oidctest.Provider
	res        *mcpauth.Resource
	mux        *http.ServeMux
	srv        *httptest.Server
	logs       *testlog.Buffer
	skew       atomic.Int64 // added to the Resource's clock, in nanoseconds
}

// newDeployment starts it all; opts (may be nil) configure the Resource
// beyond what the deployment sets.
func newDeployment(t *testing.T, opts *mcpauth.Options) *deployment {
	t.Helper()
	d := &deployment{idp: oidctest.New(t, nil), other: oidctest.New(t, &oidctest.Options{Host: "other-idp.test"}), logs: &testlog.Buffer{}}
	for _, p := range []*oidctest.Provider{d.idp, d.other} {
		p.AddClient(oidctest.Client{ID: mcpClient, RedirectURIs: []string{clientRedirect}, Audience: []string{resourceURL}})
		p.AddClient(oidctest.Client{ID: plainClient, RedirectURIs: []string{clientRedirect}})
		p.AddClient(oidctest.Client{ID: elsewhere, RedirectURIs: []string{clientRedirect}, Audience: []string{otherResource}})
	}
	var o mcpauth.Options
	if opts != nil {
		o = *opts
	}
	o.Documents = d.documents(d.idp, d.other)
	o.Logger = slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Now = func() time.Time { return time.Now().Add(time.Duration(d.skew.Load())) }
	res, err := mcpauth.New(d.idp.Issuer(), resourceURL, &o)
	if err != nil {
		t.Fatal(err)
	}
	d.res = res
	d.mux = http.NewServeMux()
	d.mux.Handle("/mcp", res.Require(whoamiServer()))
	for _, p := range res.MetadataPaths() {
		d.mux.Handle(p, res.MetadataHandler())
	}
	d.srv = httptest.NewTLSServer(d.mux)
	t.Cleanup(d.srv.Close)
	return d
}

// documents is the public-document client poppy-mcp would use: through the
// network guard, with the providers' names mapped to them (--resolve) and
// their CAs trusted (SSL_CERT_FILE).
func (d *deployment) documents(ps ...*oidctest.Provider) *discovery.Client {
	mapped := map[string]string{}
	var o netguard.Options
	for _, p := range ps {
		mapped[p.Host()+":443"] = p.Addr()
	}
	o.Resolve = func(hostport string) (string, bool) { a, ok := mapped[hostport]; return a, ok }
	pool := ps[0].CertPool()
	for _, p := range ps[1:] {
		pool.AppendCertsFromPEM(p.CAPEM())
	}
	o.RootCAs = pool
	return discovery.New(&http.Client{Transport: netguard.New(&o).Transport()}, nil)
}

// transport reaches the deployment as https://agent.test.
func (d *deployment) transport() *http.Transport {
	tr := d.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "example.com"}
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, d.srv.Listener.Addr().String())
	}
	return tr
}

// client is an HTTP client that reaches the deployment as https://agent.test,
// sending token (when not "") as a bearer token.
func (d *deployment) client(token string) *http.Client {
	tr := d.transport()
	if token == "" {
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	}
	return &http.Client{Transport: bearer{token, tr}, Timeout: 20 * time.Second}
}

// bearer sends Authorization: Bearer on every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// whoamiServer is an MCP server (mcp-go, both revisions) with one tool,
// whoami, that answers with the key of the user its context carries.
func whoamiServer() http.Handler {
	s := server.NewMCPServer("whoami", "1")
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("the caller's local user key")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(mcpauth.KeyFrom(ctx)), nil
		})
	return server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp"), server.WithDisableLocalhostProtection(true),
		server.WithEventStore(server.NewInMemoryEventStore()))
}
