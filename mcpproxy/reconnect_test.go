package mcpproxy_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/mcpproxy"
)

// echoServer is a plain mcp-go MCP server with one tool, on ln.
func echoServer(ln net.Listener, initialized *atomic.Int32) *httptest.Server {
	m := server.NewMCPServer("echo", "1", server.WithToolCapabilities(true),
		server.WithHooks(&server.Hooks{OnAfterInitialize: []server.OnAfterInitializeFunc{
			func(context.Context, any, *mcp.InitializeRequest, *mcp.InitializeResult) { initialized.Add(1) }}}))
	m.AddTool(mcp.NewToolWithRawSchema("echo", "Echoes text.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: server.NewStreamableHTTPServer(m, server.WithStateful(true))}}
	hs.Start()
	return hs
}

// TestReconnectAfterDowntime: while the server is down, requests safe to
// repeat wait and reconnect with backoff (the dials are counted); once a
// new server listens there, a new MCP session is started and calls go
// through.
func TestReconnectAfterDowntime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var first, second atomic.Int32
	hs := echoServer(ln, &first)
	var dials atomic.Int32
	dialer := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, a)
	}}}
	up, err := mcpproxy.New("http://"+addr+"/mcp", &mcpproxy.Options{ConnectWithin: 20 * time.Second,
		HTTPClient: func() (*http.Client, error) { return hc, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	call := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := up.Call(ctx, "echo", json.RawMessage(`{"text":"hi"}`), nil)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		raw, _ := json.Marshal(res.Content)
		return string(raw)
	}
	want := call()
	// Stop accepting first: a relay reconnecting between the two calls below
	// would otherwise open a stream that Close waits on for ever.
	hs.Listener.Close()
	hs.CloseClientConnections()
	hs.Close()
	down := dials.Load()
	restarted := make(chan *httptest.Server, 1)
	go func() {
		// Come back once the relay has failed to connect at least twice.
		for deadline := time.Now().Add(20 * time.Second); dials.Load() < down+2 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			close(restarted)
			return
		}
		restarted <- echoServer(ln, &second)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A list is safe to repeat: it waits for the server to come back.
	if tools, err := up.Tools(ctx); err != nil || len(tools) != 1 {
		t.Fatalf("tools after the restart: %v %v", tools, err)
	}
	if got := call(); got != want {
		t.Errorf("after the restart: %s, want %s", got, want)
	}
	if hs2 := <-restarted; hs2 != nil {
		up.Close() // ends the GET stream, which Close would wait for
		hs2.Close()
	}
	if first.Load() != 1 || second.Load() < 1 {
		t.Errorf("initialize: %d before the restart, %d after; want 1 and at least 1", first.Load(), second.Load())
	}
}
