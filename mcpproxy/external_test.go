package mcpproxy_test

// Relaying an MCP server nobody here wrote: @modelcontextprotocol/server-everything
// from npm, over streamable HTTP on a loopback port, without a token (it is
// not a Poppy Company). Install it with
//
//	npm install --no-save --no-audit --no-fund --prefix testdata-external/mcp-everything \
//	    @modelcontextprotocol/server-everything@2026.8.31
//
// The test skips without it, and fails when POPPY_REQUIRE_NPM=1 (CI).

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/mcpproxy"
)

const everythingJS = "../testdata-external/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// startEverything runs server-everything on a free loopback port and
// returns its MCP url.
func startEverything(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(everythingJS); err != nil || statErr != nil {
		msg := "server-everything not installed (npm install --no-save --prefix testdata-external/mcp-everything @modelcontextprotocol/server-everything@2026.8.31)"
		if os.Getenv("POPPY_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	abs, _ := filepath.Abs(everythingJS)
	cmd := exec.Command(node, abs, "streamableHttp")
	// A minimal environment: its get-env tool would show whatever it is given.
	cmd.Env = []string{"PORT=" + itoa(port), "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s: %s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// normalized is raw as encoding/json writes it: compact, <>& escaped, key
// order kept. Our relay re-encodes with encoding/json, a TypeScript server
// with JSON.stringify; the values and the order of members are the same.
func normalized(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRelayServerEverything(t *testing.T) {
	url := startEverything(t)
	up, err := mcpproxy.New(url, &mcpproxy.Options{Prefix: "ev_"})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("downstream", "1", server.WithToolCapabilities(true))
	relay := mcpproxy.NewRelay(srv, up, nil)
	t.Cleanup(func() { relay.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := relay.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv, server.WithEventStore(server.NewInMemoryEventStore())))
	t.Cleanup(hs.Close)
	direct := &rpcClient{t: t, hc: http.DefaultClient, url: url}
	direct.initialize()
	down := &rpcClient{t: t, hc: http.DefaultClient, url: hs.URL + "/mcp"}
	down.initialize()

	upstream := map[string]json.RawMessage{}
	for _, tool := range direct.tools() {
		upstream[strings.Trim(field(t, tool, "name"), `"`)] = tool
	}
	relayed := down.tools()
	// A task-only tool cannot be called synchronously, so it is not relayed.
	taskOnly := 0
	for _, u := range upstream {
		if strings.Contains(field(t, u, "execution"), `"taskSupport":"required"`) {
			taskOnly++
		}
	}
	if len(relayed) < 10 || len(relayed) != len(upstream)-taskOnly {
		t.Fatalf("upstream has %d tools (%d task-only), relayed %d: %v", len(upstream), taskOnly, len(relayed), relay.Tools())
	}
	for _, d := range relayed {
		name := strings.TrimPrefix(strings.Trim(field(t, d, "name"), `"`), "ev_")
		u, ok := upstream[name]
		if !ok {
			t.Errorf("relayed %s, which the upstream does not list", name)
			continue
		}
		for _, k := range []string{"inputSchema", "outputSchema", "description", "title"} {
			if got, want := field(t, d, k), field(t, u, k); want != "" && normalized(t, json.RawMessage(got)) != normalized(t, json.RawMessage(want)) {
				t.Errorf("%s.%s:\n got %s\nwant %s", name, k, got, want)
			}
		}
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"echo", map[string]any{"message": "hello <relay> & co"}},
		{"get-sum", map[string]any{"a": 2, "b": 40}},
		{"get-tiny-image", map[string]any{}},
		{"get-structured-content", map[string]any{"location": "New York"}},
		{"get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}},
		{"get-resource-links", map[string]any{"count": 2}},
		{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2}},
	} {
		if _, ok := upstream[tc.tool]; !ok {
			t.Errorf("server-everything has no %s tool any more", tc.tool)
			continue
		}
		want := direct.result("tools/call", map[string]any{"name": tc.tool, "arguments": tc.args})
		got := down.result("tools/call", map[string]any{"name": "ev_" + tc.tool, "arguments": tc.args})
		if normalized(t, got) != normalized(t, want) {
			t.Errorf("%s: relayed result differs\n got %s\nwant %s", tc.tool, got, want)
		}
	}
	// Progress of a long operation reaches the client under its own token.
	msgs := down.post("tools/call", map[string]any{"name": "ev_trigger-long-running-operation",
		"arguments": map[string]any{"duration": 1, "steps": 3}, "_meta": map[string]any{"progressToken": "ev-tok"}}, false)
	progress := 0
	for _, m := range msgs {
		if strings.Contains(string(m), `"notifications/progress"`) && strings.Contains(string(m), `"ev-tok"`) {
			progress++
		}
	}
	if progress != 3 {
		t.Errorf("%d progress notifications relayed, want 3: %s", progress, msgs)
	}
}
