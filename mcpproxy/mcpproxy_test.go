package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpproxy"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestToolsByteForByte: every page is followed and each schema reaches the
// downstream client exactly as the upstream listed it, top-level anyOf,
// description and $schema included.
func TestToolsByteForByte(t *testing.T) {
	f := newFixture(t, nil, nil)
	upstream := f.direct(t).tools()
	f.sync(t)
	down := f.downstream(t, nil).tools()
	if len(upstream) != 4 || len(down) != len(upstream) {
		t.Fatalf("upstream lists %d tools, downstream %d", len(upstream), len(down))
	}
	byName := map[string]json.RawMessage{}
	for _, d := range down {
		byName[strings.Trim(field(t, d, "name"), `"`)] = d
	}
	for _, u := range upstream {
		name := strings.Trim(field(t, u, "name"), `"`)
		d, ok := byName["ex_"+name]
		if !ok {
			t.Errorf("%s not relayed as ex_%s; downstream has %v", name, name, f.relay.Tools())
			continue
		}
		for _, k := range []string{"inputSchema", "outputSchema", "description", "title"} {
			if got, want := field(t, d, k), field(t, u, k); got != want {
				t.Errorf("%s.%s:\n got %s\nwant %s", name, k, got, want)
			}
		}
	}
	search := field(t, byName["ex_search_products"], "inputSchema")
	for _, part := range []string{`"anyOf":`, `"$schema":`, `"description":"Give words`} {
		if !strings.Contains(search, part) {
			t.Errorf("search_products' schema lost %s: %s", part, search)
		}
	}
	if got := methods(f.co, "/mcp")["POST tools/list"]; got < 3 {
		t.Errorf("the relay sent %d tools/list requests; with 4 tools in pages of 2 it must follow the cursor", got)
	}
}

// TestResultsUnchanged: a relayed result is the upstream's, byte for byte.
func TestResultsUnchanged(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.sync(t)
	direct, down := f.direct(t), f.downstream(t, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string // in the result
	}{
		{"search_products", map[string]any{"query": "jacket", "filters": map[string]any{"max_price": 200}}, `"structuredContent":{"products":`},
		{"search_products", map[string]any{"query": "umbrella"}, `"isError":true`},
		{"product_image", map[string]any{"sku": "rain-hat-os"}, `"type":"image"`},
		{"product_image", map[string]any{"sku": "stormline-m"}, `"type":"resource"`},
	} {
		want := direct.result("tools/call", map[string]any{"name": tc.tool, "arguments": tc.args})
		got := down.result("tools/call", map[string]any{"name": "ex_" + tc.tool, "arguments": tc.args})
		if string(got) != string(want) {
			t.Errorf("%s: relayed result differs\n got %s\nwant %s", tc.tool, got, want)
		}
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("%s: %s not in %s", tc.tool, tc.want, got)
		}
	}
	if !strings.Contains(string(down.result("tools/call", map[string]any{"name": "ex_product_image",
		"arguments": map[string]any{"sku": "rain-hat-os"}})), `"annotations":{"audience":["user","assistant"]}`) {
		t.Error("content annotations lost")
	}
}

// TestProgressRelayed: the upstream's progress reaches the client under
// the client's own token.
func TestProgressRelayed(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.sync(t)
	msgs := f.downstream(t, nil).post("tools/call", map[string]any{"name": "ex_count_slowly",
		"arguments": map[string]any{"steps": 4}, "_meta": map[string]any{"progressToken": "client-tok"}}, false)
	var steps []float64
	for _, m := range msgs {
		var n struct {
			Method string `json:"method"`
			Params struct {
				Token    any     `json:"progressToken"`
				Progress float64 `json:"progress"`
				Total    float64 `json:"total"`
				Message  string  `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(m, &n) == nil && n.Method == "notifications/progress" {
			// The upstream's message is the Company's words: marked so.
			if n.Params.Token != "client-tok" || n.Params.Total != 4 || n.Params.Message != fmt.Sprintf(`Company text "step %g"`, n.Params.Progress) {
				t.Errorf("progress %s", m)
			}
			steps = append(steps, n.Params.Progress)
		}
	}
	// poppytest's server (mcp-go) may put a call's progress on the GET stream
	// instead of the call's own, where it can come after the result: some may
	// be missing, but what is relayed must be in order (the server-everything
	// test checks that every one is relayed).
	if !slices.IsSorted(steps) || len(slices.Compact(slices.Clone(steps))) != len(steps) || len(steps) > 4 {
		t.Errorf("progress relayed: %v, want increasing values of 1 2 3 4", steps)
	}
}

// TestListChanged: tools the upstream adds or removes are added and deleted.
func TestListChanged(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.sync(t)
	f.co.MCPAddTool("size_advice", "Suggests a size.")
	waitFor(t, "ex_size_advice relayed", func() bool { return slices.Contains(f.relay.Tools(), "ex_size_advice") })
	if f.srv.GetTool("ex_size_advice") == nil {
		t.Fatal("relayed tool not on the server")
	}
	f.co.MCPRemoveTool("size_advice")
	waitFor(t, "ex_size_advice removed", func() bool { return f.srv.GetTool("ex_size_advice") == nil })
}

// TestUpstreamRestart: after a restart the call goes through on a new MCP
// session, and list_changed is heard again.
func TestUpstreamRestart(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.sync(t)
	down := f.downstream(t, nil)
	call := func() string {
		return string(down.result("tools/call", map[string]any{"name": "ex_search_products", "arguments": map[string]any{"query": "hat"}}))
	}
	before := call()
	f.co.RestartMCP()
	if after := call(); after != before {
		t.Errorf("after a restart: %s, want %s", after, before)
	}
	if n := methods(f.co, "/mcp")["POST initialize"]; n < 2 {
		t.Errorf("%d initialize requests; want a new MCP session after the restart", n)
	}
	f.co.MCPAddTool("size_advice", "Suggests a size.")
	waitFor(t, "list_changed after the restart", func() bool { return f.srv.GetTool("ex_size_advice") != nil })
}

// TestIdleConnectionClosed: an idle connection is closed (DELETE ends the
// MCP session) and the next call connects again.
func TestIdleConnectionClosed(t *testing.T) {
	f := newFixture(t, nil, &mcpproxy.Options{Prefix: "ex_", IdleTimeout: 20 * time.Millisecond})
	f.sync(t)
	waitFor(t, "the idle connection closed", func() bool { return methods(f.co, "/mcp")["DELETE "] >= 1 })
	res, err := f.up.Call(context.Background(), "search_products", json.RawMessage(`{"query":"socks"}`), nil)
	if err != nil || res.IsError {
		t.Fatalf("call after idle close: %v %v", res, err)
	}
	if n := methods(f.co, "/mcp")["POST initialize"]; n != 2 {
		t.Errorf("%d initialize requests, want 2 (one per connection)", n)
	}
}

// TestDownstreamCredentialsStayDownstream: the client's own Authorization
// header, cookies and _meta never reach the upstream.
func TestDownstreamCredentialsStayDownstream(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.sync(t)
	const secret = "downstream-secret-7f3a"
	down := f.downstream(t, http.Header{"Authorization": {"Bearer " + secret}, "Cookie": {"sid=" + secret}})
	down.result("tools/call", map[string]any{"name": "ex_search_products", "arguments": map[string]any{"query": "hat"},
		"_meta": map[string]any{"client": secret}})
	for _, r := range f.co.Requests() {
		raw, _ := json.Marshal(r.Header)
		if strings.Contains(string(raw)+string(r.Body), secret) {
			t.Errorf("%s %s%s carried the downstream's credential", r.Method, r.Host, r.Path)
		}
		if r.Host == "mcp.example.com" && r.Path == "/mcp" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			t.Errorf("%s to the MCP server without the Session's Bearer token", r.Method)
		}
	}
}

// TestSignInErrors: scope errors of the upstream come back as auth's
// errors, for the caller to name the sign-in to do.
func TestSignInErrors(t *testing.T) {
	f := newFixture(t, nil, nil)
	_, err := f.up.Call(context.Background(), "order_status", nil, nil)
	var aerr *auth.Error
	if !errors.Is(err, auth.ErrSignInRequired) || !errors.As(err, &aerr) {
		t.Fatalf("signed-out order_status: %v, want auth's sign_in_required", err)
	}
	_, err = f.up.Call(context.Background(), "no_such_tool", nil, nil)
	if !errors.Is(err, mcpproxy.ErrInvalidParams) {
		t.Errorf("unknown tool: %v, want a JSON-RPC invalid params error", err)
	}
}

// TestUpstreamDown: a server that cannot be reached fails the call after
// the backoff, without hanging.
func TestUpstreamDown(t *testing.T) {
	f := newFixture(t, nil, &mcpproxy.Options{Prefix: "ex_", ConnectWithin: 300 * time.Millisecond})
	f.co.Close()
	_, err := f.up.Tools(context.Background())
	if err == nil {
		t.Fatal("listing a closed server succeeded")
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		url    string
		prefix string
	}{{"ftp://x/mcp", ""}, {"https:///mcp", ""}, {mcpURL, "bad prefix"}, {mcpURL, strings.Repeat("p", 33)}} {
		if _, err := mcpproxy.New(tc.url, &mcpproxy.Options{Prefix: tc.prefix}); err == nil {
			t.Errorf("New(%q, prefix %q) accepted", tc.url, tc.prefix)
		}
	}
}

var _ = poppytest.OrderShipped

// resultParts splits a tools/call result as it crossed the wire.
type resultParts struct {
	Content    []json.RawMessage `json:"content"`
	Structured json.RawMessage   `json:"structuredContent"`
	Meta       map[string]any    `json:"_meta"`
}

func parts(t *testing.T, raw []byte) resultParts {
	t.Helper()
	var p resultParts
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return p
}

// TestResultsMarked: with Meta and Note, a relayed result carries the
// mark where a client sees it, before the upstream's blocks, which stay
// byte for byte; the hidden characters of the upstream's text are shown
// as escapes, and nothing else of that block changes. The old relay passed
// results through unmarked, format characters and all.
func TestResultsMarked(t *testing.T) {
	const note = "[example.com MCP server: Company text]"
	meta := map[string]any{"poppy/company_content": map[string]any{"domain": "example.com"}}
	f := newFixtureWith(t, nil, nil, &mcpproxy.RelayOptions{Meta: meta, Note: note})
	f.co.MCPAddTool("echo", "Says the text again.")
	f.sync(t)
	direct, down := f.direct(t), f.downstream(t, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"search_products", map[string]any{"query": "jacket"}},
		{"product_image", map[string]any{"sku": "rain-hat-os"}},
		{"product_image", map[string]any{"sku": "stormline-m"}},
		{"echo", map[string]any{"text": "ord_1042, <fine> & plain"}},
	} {
		want := parts(t, direct.result("tools/call", map[string]any{"name": tc.tool, "arguments": tc.args}))
		got := parts(t, down.result("tools/call", map[string]any{"name": "ex_" + tc.tool, "arguments": tc.args}))
		if len(got.Content) != len(want.Content)+1 || !strings.Contains(string(got.Content[0]), note) {
			t.Fatalf("%s: content %s, want the note, then %s", tc.tool, got.Content, want.Content)
		}
		for i := range want.Content {
			if string(got.Content[i+1]) != string(want.Content[i]) {
				t.Errorf("%s: block %d changed:\n got %s\nwant %s", tc.tool, i, got.Content[i+1], want.Content[i])
			}
		}
		if string(got.Structured) != string(want.Structured) {
			t.Errorf("%s: structured content %s, want %s", tc.tool, got.Structured, want.Structured)
		}
		if mark, _ := got.Meta["poppy/company_content"].(map[string]any); mark["domain"] != "example.com" {
			t.Errorf("%s: _meta %v, want the mark", tc.tool, got.Meta)
		}
	}
	hidden := "ord_1\u202E2\U000E0069"
	got := parts(t, down.result("tools/call", map[string]any{"name": "ex_echo", "arguments": map[string]any{"text": hidden}}))
	var block struct{ Type, Text string }
	if err := json.Unmarshal(got.Content[1], &block); err != nil || block.Type != "text" || block.Text != `ord_1\u202E2\uDB40\uDC69` {
		t.Errorf("echo of hidden characters: %s, want them shown as escapes", got.Content[1])
	}
	if !slices.ContainsFunc(got.Content, func(c json.RawMessage) bool { return strings.Contains(string(c), note) }) {
		t.Error("no note")
	}
}

// TestTransportLogQuiet: mcp-go's client transport logs its machinery at
// info ("listening to server forever", on every connection); poppy-mcp
// passes it on at debug, marked as mcp-go's and with the server's URL, so
// the info log keeps none of it. Before, every relayed MCP server put that
// line in serve's log.
func TestTransportLogQuiet(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	f := newFixture(t, nil, &mcpproxy.Options{Prefix: "ex_",
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	read := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	f.sync(t)
	// The transport logs from its own goroutine.
	waitFor(t, "mcp-go's record", func() bool { return strings.Contains(read(), "listening to server forever") })
	if got := read(); !strings.Contains(got, `level=DEBUG msg="mcpproxy: mcp-go: listening to server forever" url=`+mcpURL) {
		t.Errorf("mcp-go's record is not at debug, marked as mcp-go's, with the URL:\n%s", got)
	}
}

// lockedWriter serializes writes from the transport's goroutines.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
