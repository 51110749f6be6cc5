package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpproxy"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// exampleSession is a Session with poppytest's Company, as the tools layer
// has after start_session.
func exampleSession(t poppytest.T) *auth.Session {
	company := poppytest.NewServer(t, nil)
	ctx := context.Background()
	id, err := auth.NewIdentity(ctx, "https://agent.example/agent.json", nil)
	if err != nil {
		log.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	company.SetAgentDocuments(agentJSON, jwks)
	sess, err := auth.New(id, &auth.Options{HTTPClient: company.Client()}).StartSession(ctx, auth.Company{
		Issuer: company.Issuer(), TokenEndpoint: "https://auth.example.com/oauth/token",
		MCPServers: []string{"https://mcp.example.com/mcp"}, // the mcp apis of poppy.json
	}, "usr_Q7c1vK")
	if err != nil {
		log.Fatal(err)
	}
	return sess
}

// A Company's MCP server, reached with the Session's Bearer client: auth
// builds the token, mcpproxy only relays.
func ExampleNew() {
	t := &poppytest.Reporter{}
	defer t.Close()
	sess := exampleSession(t)
	const url = "https://mcp.example.com/mcp"
	up, err := mcpproxy.New(url, &mcpproxy.Options{
		Prefix:     "example_com_mcp_",
		HTTPClient: func() (*http.Client, error) { return sess.BearerClient(url) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer up.Close()
	tools, err := up.Tools(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, tool := range tools {
		fmt.Println(tool.Name, "<-", tool.Upstream)
	}
	res, err := up.Call(context.Background(), "search_products", json.RawMessage(`{"query":"rain"}`), nil)
	if err != nil {
		log.Fatal(err)
	}
	content, _ := json.Marshal(res.Content)
	fmt.Println(string(content), string(res.RawStructuredContent))
	// Output:
	// example_com_mcp_count_slowly <- count_slowly
	// example_com_mcp_order_status <- order_status
	// example_com_mcp_product_image <- product_image
	// example_com_mcp_search_products <- search_products
	// [{"type":"text","text":"1 products match."}] {"products":[{"sku":"rain-hat-os","name":"Rain hat, one size","price":35}]}
}

// A Relay announces the upstream's tools on poppy-mcp's own MCP server and
// follows the upstream's list_changed.
func ExampleNewRelay() {
	t := &poppytest.Reporter{}
	defer t.Close()
	sess := exampleSession(t)
	const url = "https://mcp.example.com/mcp"
	up, err := mcpproxy.New(url, &mcpproxy.Options{
		Prefix:     "example_com_mcp_",
		HTTPClient: func() (*http.Client, error) { return sess.BearerClient(url) },
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := server.NewMCPServer("poppy-mcp", "1", server.WithToolCapabilities(true))
	relay := mcpproxy.NewRelay(srv, up, &mcpproxy.RelayOptions{
		Describe: func(t mcpproxy.Tool) string { return "[Company text] " + t.Def.Description },
	})
	defer relay.Close()
	if err := relay.Sync(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(relay.Tools())
	fmt.Println(srv.GetTool("example_com_mcp_search_products").Tool.Description)
	// Output:
	// [example_com_mcp_count_slowly example_com_mcp_order_status example_com_mcp_product_image example_com_mcp_search_products]
	// [Company text] Search the catalog by words, sizes and price.
}
