package mcpproxy_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// BenchmarkCall compares one tools/call of poppytest's MCP server (over
// TLS, with a Bearer token) made directly by mcp-go's client with the same
// call relayed: through an in-process client of the relaying server (the
// relay's own cost), and over HTTP (what an MCP client of poppy-mcp pays).
func BenchmarkCall(b *testing.B) {
	f := newFixture(b, nil, nil)
	f.sync(b)
	ctx := context.Background()
	args := map[string]any{"query": "jacket"}

	hc, err := f.sess.BearerClient(mcpURL)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := transport.NewStreamableHTTP(mcpURL, transport.WithHTTPBasicClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	direct := startClient(b, client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125)))
	inproc, err := client.NewInProcessClient(f.srv)
	if err != nil {
		b.Fatal(err)
	}
	relayed := startClient(b, inproc)
	downHTTP, err := client.NewStreamableHttpClient(f.down, transport.WithHTTPTimeout(0))
	if err != nil {
		b.Fatal(err)
	}
	overHTTP := startClient(b, downHTTP)

	for _, bc := range []struct {
		name string
		c    *client.Client
		tool string
	}{{"direct", direct, "search_products"}, {"relayed", relayed, "ex_search_products"}, {"relayed-http", overHTTP, "ex_search_products"}} {
		b.Run(bc.name, func(b *testing.B) {
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = bc.tool, args
			for b.Loop() {
				res, err := bc.c.CallTool(ctx, req)
				if err != nil || res.IsError {
					b.Fatalf("%v %v", res, err)
				}
			}
		})
	}
}

func startClient(b *testing.B, c *client.Client) *client.Client {
	b.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
