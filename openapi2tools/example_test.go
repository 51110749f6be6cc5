package openapi2tools_test

import (
	"context"
	"fmt"
	"log"

	"github.com/poppy-mcp/poppy-mcp/openapi2tools"
)

const exampleDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "Orders", "version": "1"},
  "servers": [{"url": "https://api.example.com"}],
  "paths": {
    "/orders/{order_id}/exchanges": {
      "post": {
        "operationId": "createExchange",
        "summary": "Exchange an item for another size",
        "parameters": [{"name": "order_id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
          "type": "object", "required": ["item_id", "replacement_sku"],
          "properties": {"item_id": {"type": "string"}, "replacement_sku": {"type": "string"}}}}}}
      }
    }
  }
}`

// Load translates the Company's document; NewRequest turns a model's
// arguments into the request the Session's DPoP client sends (Poppy 0.1 §6).
func ExampleLoad() {
	ctx := context.Background()
	cat, err := openapi2tools.Load(ctx, []byte(exampleDoc), "https://api.example.com/openapi.json",
		&openapi2tools.Options{Prefix: "ex_"})
	if err != nil {
		log.Fatal(err)
	}
	tool := cat.Tools[0]
	fmt.Println(tool.Name)
	fmt.Println(tool.Description)
	fmt.Println(string(tool.InputSchema))

	req, err := cat.NewRequest(ctx, "ex_createExchange", map[string]any{
		"order_id": "ord_7Hk2", "item_id": "itm_4Qa", "replacement_sku": "stormline-insulated-m",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(req.Method, req.URL)
	// Then: res, err := openapi2tools.Do(ctx, sessionClient, req, nil),
	// or cat.Call(ctx, sessionClient, name, args, nil) for both steps.

	// Output:
	// ex_createExchange
	// POST /orders/{order_id}/exchanges. Exchange an item for another size.
	// {"additionalProperties":false,"properties":{"item_id":{"type":"string"},"order_id":{"type":"string"},"replacement_sku":{"type":"string"}},"required":["order_id","item_id","replacement_sku"],"type":"object"}
	// POST https://api.example.com/orders/ord_7Hk2/exchanges
}

// Search finds operations by words in their names, paths, summaries and tags.
func ExampleCatalog_Search() {
	cat, err := openapi2tools.Load(context.Background(), []byte(exampleDoc), "", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range cat.Search("exchange size", 5) {
		fmt.Println(t.Name, t.Method, t.Path)
	}
	// Output:
	// createExchange POST /orders/{order_id}/exchanges
}

// A catalog is stored after translation and reused on the next start.
func ExampleUnmarshalCatalog() {
	cat, err := openapi2tools.Load(context.Background(), []byte(exampleDoc), "", nil)
	if err != nil {
		log.Fatal(err)
	}
	blob, err := cat.MarshalBinary() // store this
	if err != nil {
		log.Fatal(err)
	}
	again, err := openapi2tools.UnmarshalCatalog(blob)
	if err != nil {
		log.Fatal(err)
	}
	_, ok := again.Tool("createExchange")
	fmt.Println(ok)
	// Output:
	// true
}
