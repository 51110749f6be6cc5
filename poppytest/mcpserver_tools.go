package poppytest

// The MCP server's tools ("Product search and sizing" in poppy.json). They
// cover what a relay must carry unchanged: a nested input schema with the
// top-level description, anyOf and $schema that mcp-go's typed ListTools
// drops, an output schema with structured content, an image, an embedded
// resource, annotations on content, an isError result, progress
// notifications, and a tool that needs a scope (order_status, poppy:read).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// mcpToolScopes are the scopes each scoped tool needs (Poppy 0.1 §4.4).
var mcpToolScopes = map[string][]string{"order_status": {"poppy:read"}}

// searchSchema has top-level parts a typed tool list drops ($schema,
// description, anyOf), nested objects, an array and an enum.
const searchSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema",` +
	`"type":"object","description":"Give words, filters, or both.",` +
	`"properties":{"query":{"type":"string","description":"Words to look for, such as \"jacket\" or \"socks\""},` +
	`"filters":{"type":"object","properties":{` +
	`"max_price":{"type":"integer","minimum":0,"description":"Highest price in whole dollars"},` +
	`"sizes":{"type":"array","items":{"type":"string","enum":["S","M","L","one size"]},"uniqueItems":true}},` +
	`"additionalProperties":false}},` +
	`"anyOf":[{"required":["query"]},{"required":["filters"]}],"additionalProperties":false}`

const searchOutputSchema = `{"type":"object","properties":{"products":{"type":"array","items":{"type":"object",` +
	`"properties":{"sku":{"type":"string"},"name":{"type":"string"},"price":{"type":"integer"}},` +
	`"required":["sku","name","price"]}}},"required":["products"]}`

const skuSchema = `{"type":"object","properties":{"sku":{"type":"string","description":"A SKU from search_products"}},"required":["sku"]}`

const orderStatusSchema = `{"type":"object","properties":{"order_id":{"type":"string","description":"One order, such as ord_1042; all orders when left out"}}}`

const countSchema = `{"type":"object","properties":{"steps":{"type":"integer","minimum":1,"maximum":20}},"required":["steps"]}`

// tinyPNG is a 1x1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// mcpTools are the default tools of the MCP server.
func (s *mcpState) mcpTools() []server.ServerTool {
	search := mcp.NewToolWithRawSchema("search_products", "Search the catalog by words, sizes and price.", json.RawMessage(searchSchema))
	search.RawOutputSchema = json.RawMessage(searchOutputSchema)
	search.Annotations = mcp.ToolAnnotation{Title: "Search products", ReadOnlyHint: mcp.ToBoolPtr(true),
		DestructiveHint: mcp.ToBoolPtr(false), IdempotentHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)}
	image := mcp.NewToolWithRawSchema("product_image", "A product's picture and its catalog entry.", json.RawMessage(skuSchema))
	image.Annotations = mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)}
	orders := mcp.NewToolWithRawSchema("order_status", "Where the signed-in account's orders are. Needs poppy:read.", json.RawMessage(orderStatusSchema))
	count := mcp.NewToolWithRawSchema("count_slowly", "Counts to steps, reporting progress at each step.", json.RawMessage(countSchema))
	return []server.ServerTool{
		{Tool: search, Handler: s.mcpSearch},
		{Tool: image, Handler: s.mcpImage},
		{Tool: orders, Handler: s.mcpOrderStatus},
		{Tool: count, Handler: mcpCount},
	}
}

type mcpProduct struct {
	SKU   string `json:"sku"`
	Name  string `json:"name"`
	Price int    `json:"price"`
}

func (s *mcpState) mcpSearch(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Query   string `json:"query"`
		Filters struct {
			MaxPrice *int     `json:"max_price"`
			Sizes    []string `json:"sizes"`
		} `json:"filters"`
	}
	if err := req.BindArguments(&args); err != nil {
		return mcp.NewToolResultError("poppytest: arguments: " + err.Error()), nil
	}
	found := []mcpProduct{}
	for _, p := range s.Products() {
		name := strings.ToLower(p.Name)
		switch {
		case args.Query != "" && !strings.Contains(name, strings.ToLower(args.Query)):
		case args.Filters.MaxPrice != nil && p.Price > *args.Filters.MaxPrice:
		case len(args.Filters.Sizes) > 0 && !slices.ContainsFunc(args.Filters.Sizes, func(sz string) bool {
			return strings.HasSuffix(name, "size "+strings.ToLower(sz)) || strings.HasSuffix(name, strings.ToLower(sz))
		}):
		default:
			found = append(found, mcpProduct{p.SKU, p.Name, p.Price})
		}
	}
	if len(found) == 0 {
		return mcp.NewToolResultError(fmt.Sprintf("No product matches %q.", args.Query)), nil
	}
	return mcp.NewToolResultStructured(map[string]any{"products": found}, fmt.Sprintf("%d products match.", len(found))), nil
}

func (s *mcpState) mcpImage(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	sku := req.GetString("sku", "")
	i := slices.IndexFunc(s.Products(), func(p Product) bool { return p.SKU == sku })
	if i < 0 {
		return mcp.NewToolResultError("Unknown SKU " + sku + "."), nil
	}
	p := s.Products()[i]
	entry, _ := json.Marshal(mcpProduct{p.SKU, p.Name, p.Price})
	text := mcp.NewTextContent(p.Name)
	text.Annotations = &mcp.Annotations{Audience: []mcp.Role{mcp.RoleUser, mcp.RoleAssistant}}
	return &mcp.CallToolResult{Content: []mcp.Content{
		text,
		mcp.NewImageContent(tinyPNG, "image/png"),
		mcp.NewEmbeddedResource(mcp.TextResourceContents{
			URI: s.URL(s.domain, "/products/"+p.SKU), MIMEType: "application/json", Text: string(entry)}),
	}}, nil
}

func (s *mcpState) mcpOrderStatus(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	if c == nil || c.Account == "" {
		return mcp.NewToolResultError("poppytest: order_status without a signed-in caller"), nil
	}
	type orderWire struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
		Status  string `json:"status"`
	}
	out := []orderWire{}
	id := req.GetString("order_id", "")
	for _, o := range s.Orders(c.Account) {
		if id == "" || o.ID == id {
			out = append(out, orderWire{o.ID, o.Summary, o.Status})
		}
	}
	if len(out) == 0 {
		return mcp.NewToolResultError("No order " + id + " on this account."), nil
	}
	return mcp.NewToolResultStructured(map[string]any{"orders": out}, fmt.Sprintf("%d orders.", len(out))), nil
}

// mcpCount sends a notifications/progress per step when the call has a
// progressToken (MCP 2025-11-25 "Progress").
func mcpCount(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps := req.GetInt("steps", 0)
	if steps < 1 || steps > 20 {
		return mcp.NewToolResultError("steps must be 1 to 20."), nil
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	srv := server.ServerFromContext(ctx)
	for i := 1; i <= steps && token != nil && srv != nil; i++ {
		_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d", i)})
	}
	return mcp.NewToolResultText(fmt.Sprintf("Counted to %d.", steps)), nil
}

// echoTool is a tool added by MCPAddTool.
func echoTool(name, description string) (mcp.Tool, server.ToolHandlerFunc) {
	t := mcp.NewToolWithRawSchema(name, description, json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`))
	return t, func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(req.GetString("text", "")), nil
	}
}
