package tools_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// openMCPStreams counts the requests to the Company's MCP server that the
// Company is serving now: the relay's GET stream, when it has one.
func openMCPStreams(h *evictHarness) int {
	n := 0
	for _, r := range h.company.Open() {
		if r.Host == "mcp.example.com" && r.Method == http.MethodGet {
			n++
		}
	}
	return n
}

// TestHostedRelayClosesWhenIdle: a person of a hosted poppy-mcp holds no
// connection to the Company's MCP server between uses of their relay
// (BENCHMARKS.md "Hosted: people waiting": a thousand waiting people held
// a thousand GET streams, and their buffers and goroutines, for nothing).
// The relay lists the tools when the Session starts and closes soon
// after; a relayed call connects again and works.
func TestHostedRelayClosesWhenIdle(t *testing.T) {
	t.Parallel()
	e := newEvictHarness(t)
	cs, _ := e.as(t, mcpauth.User{Issuer: "https://login.example.org", Subject: "dana"})
	call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	if len(relayedTools(t, cs)) == 0 {
		t.Fatal("no relayed tools after start_session")
	}
	// The relay's GET stream opened with its first connection; wait for it
	// to close (the default single-user relay keeps it 10 minutes).
	for deadline := time.Now().Add(30 * time.Second); openMCPStreams(e) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay still holds %d GET streams open to the Company's MCP server while idle", openMCPStreams(e))
		}
	}
	got, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: relayPrefix + "search_products", Arguments: map[string]any{"query": "jacket"}})
	if err != nil || got.IsError {
		t.Fatalf("relayed call after the relay closed: %v %v", got, err)
	}
}
