package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpproxy"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const mcpURL = "https://mcp.example.com/mcp"

// fixture is a poppytest Company, a Session with it, and a relay of its MCP
// server on a downstream mcp-go server served over HTTP.
type fixture struct {
	co    *poppytest.Server
	sess  *auth.Session
	up    *mcpproxy.Upstream
	relay *mcpproxy.Relay
	srv   *server.MCPServer
	down  string // the downstream's MCP endpoint
}

func newFixture(t testing.TB, copts *poppytest.Options, opts *mcpproxy.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, copts, opts, nil)
}

// newFixtureWith is newFixture with the Relay's options.
func newFixtureWith(t testing.TB, copts *poppytest.Options, opts *mcpproxy.Options, ropts *mcpproxy.RelayOptions) *fixture {
	t.Helper()
	ctx := context.Background()
	co := poppytest.NewServer(t, copts)
	id, err := auth.NewIdentity(ctx, "https://agent.example/agent.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	co.SetAgentDocuments(agentJSON, jwks)
	agent := auth.New(id, &auth.Options{HTTPClient: co.Client()})
	sess, err := agent.StartSession(ctx, auth.Company{Issuer: co.Issuer(), Domain: co.Domain(),
		TokenEndpoint: co.URL("auth."+co.Domain(), "/oauth/token"), MCPServers: []string{mcpURL}}, "usr_test")
	if err != nil {
		t.Fatal(err)
	}
	o := mcpproxy.Options{Prefix: "ex_"}
	if opts != nil {
		o = *opts
	}
	o.HTTPClient = func() (*http.Client, error) { return sess.BearerClient(mcpURL) }
	up, err := mcpproxy.New(mcpURL, &o)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("downstream", "1", server.WithToolCapabilities(true))
	relay := mcpproxy.NewRelay(srv, up, ropts)
	t.Cleanup(func() { relay.Close() })
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv, server.WithEventStore(server.NewInMemoryEventStore())))
	t.Cleanup(hs.Close)
	return &fixture{co: co, sess: sess, up: up, relay: relay, srv: srv, down: hs.URL + "/mcp"}
}

// sync runs the relay's first Sync.
func (f *fixture) sync(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.relay.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// direct is a hand-made MCP client of the upstream, with the Session's Bearer client.
func (f *fixture) direct(t testing.TB) *rpcClient {
	t.Helper()
	hc, err := f.sess.BearerClient(mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	c := &rpcClient{t: t, hc: hc, url: mcpURL}
	c.initialize()
	return c
}

// downstream is a hand-made MCP client of the relaying server.
func (f *fixture) downstream(t testing.TB, header http.Header) *rpcClient {
	t.Helper()
	c := &rpcClient{t: t, hc: http.DefaultClient, url: f.down, header: header}
	c.initialize()
	return c
}

// rpcClient speaks MCP 2025-11-25 over streamable HTTP by hand, so tests
// see the bytes on the wire.
type rpcClient struct {
	t       testing.TB
	hc      *http.Client
	url     string
	header  http.Header
	session string
	id      int
}

// post sends one message and returns every JSON-RPC message of the answer.
func (c *rpcClient) post(method string, params any, notification bool) []json.RawMessage {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if !notification {
		c.id++
		msg["id"] = c.id
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		c.t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	var out []json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				out = append(out, json.RawMessage(strings.TrimSpace(data)))
			}
		}
		return out
	}
	var raw json.RawMessage
	if json.NewDecoder(resp.Body).Decode(&raw) == nil {
		out = append(out, raw)
	}
	return out
}

// result is the raw result of a request, failing on a JSON-RPC error.
func (c *rpcClient) result(method string, params any) json.RawMessage {
	c.t.Helper()
	for _, m := range c.post(method, params, false) {
		var v struct {
			ID     any             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(m, &v) == nil && v.ID != nil {
			if v.Error != nil {
				c.t.Fatalf("%s: JSON-RPC error %s", method, v.Error)
			}
			return v.Result
		}
	}
	c.t.Fatalf("%s: no response", method)
	return nil
}

func (c *rpcClient) initialize() {
	c.t.Helper()
	c.result("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	c.post("notifications/initialized", nil, true)
}

// tools returns every tool object of tools/list, all pages, raw.
func (c *rpcClient) tools() []json.RawMessage {
	c.t.Helper()
	var out []json.RawMessage
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(c.result("tools/list", params), &page); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, page.Tools...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// field returns one top-level member of a JSON object, compacted.
func field(t testing.TB, obj json.RawMessage, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if v, ok := m[name]; ok {
		if err := json.Compact(&b, v); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// methods counts the JSON-RPC methods of the requests the Company got at path.
func methods(co *poppytest.Server, path string) map[string]int {
	n := map[string]int{}
	for _, r := range co.Requests() {
		if r.Host != "mcp.example.com" || r.Path != path {
			continue
		}
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(r.Body, &m)
		n[r.Method+" "+m.Method]++
	}
	return n
}
