package poppytest

// This file serves the Company's store API (Poppy 0.1 §6): an OpenAPI 3.1
// document at https://api.<domain>/openapi.json, the url of the openapi
// entry of poppy.json, describing the operations served by openapi_api.go
// under https://api.<domain>/store.
// Every operation takes a DPoP Session Token (§4.3, §6: "DPoP for
// OpenAPI"); GET /products is public (no account), the others read or
// change the signed-in account's orders with poppy:read or poppy:write.
// With Options.OpenAPIResource, the openapi entry gets a resource and the
// API accepts only tokens issued for it (§4.3 "Narrower tokens").

import (
	"encoding/json"
	"strings"
)

// storeAPI is the Server's concern of its store API: the OpenAPI document
// and the operations it describes, over the shop. It holds no state of its
// own: the documents and the shop do.
type storeAPI struct {
	*Server
}

// openAPIPath is where the store API's document is served on api.<domain>,
// and storeBase the path of its server, under which its operations are.
const (
	openAPIPath = "/openapi.json"
	storeBase   = "/store"
)

// openAPIDocument is the store API's document; {{api}} is its server.
// POST /orders/{order_id}/exchanges takes an order_id in its body beside
// the path's, so an agent must route the two apart (docs/tools.md "API arguments").
const openAPIDocument = `{
  "openapi": "3.1.0",
  "info": {
    "title": "Example Company Store API",
    "version": "1.0.0",
    "description": "The product catalog, and the signed-in account's orders, returns and exchanges."
  },
  "servers": [{"url": "{{api}}"}],
  "security": [{"poppy": []}],
  "tags": [
    {"name": "products", "description": "What the shop sells"},
    {"name": "orders", "description": "The account's orders, returns and exchanges"}
  ],
  "paths": {
    "/products": {"get": {
      "operationId": "listProducts", "summary": "List the products for sale", "tags": ["products"],
      "description": "Public: needs a Session but no account.",
      "parameters": [{"name": "q", "in": "query", "description": "Words to look for in product names", "schema": {"type": "string"}}],
      "responses": {"200": {"description": "Products", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ProductList"}}}}}
    }},
    "/orders": {"get": {
      "operationId": "listOrders", "summary": "List the account's orders", "tags": ["orders"],
      "security": [{"poppy": ["poppy:read"]}],
      "parameters": [{"name": "status", "in": "query", "description": "Only orders with this status",
        "schema": {"type": "string", "enum": ["processing", "shipped", "delivered"]}}],
      "responses": {"200": {"description": "Orders", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OrderList"}}}},
        "401": {"$ref": "#/components/responses/Unauthorized"}, "403": {"$ref": "#/components/responses/Forbidden"}}
    }},
    "/orders/{order_id}": {"get": {
      "operationId": "getOrder", "summary": "Get one order with its items", "tags": ["orders"],
      "security": [{"poppy": ["poppy:read"]}],
      "parameters": [{"$ref": "#/components/parameters/OrderID"}],
      "responses": {"200": {"description": "The order", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"}}}},
        "404": {"$ref": "#/components/responses/Problem"}}
    }},
    "/orders/{order_id}/returns": {"post": {
      "operationId": "createReturn", "summary": "Return a delivered order", "tags": ["orders"],
      "security": [{"poppy": ["poppy:write"]}],
      "parameters": [{"$ref": "#/components/parameters/OrderID"}],
      "requestBody": {"required": true, "content": {"application/json": {"schema": {
        "type": "object", "additionalProperties": false, "required": ["reason"],
        "properties": {"reason": {"type": "string", "description": "Why the order goes back", "maxLength": 500}}}}}},
      "responses": {"201": {"description": "The return", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Return"}}}},
        "404": {"$ref": "#/components/responses/Problem"}, "409": {"$ref": "#/components/responses/Problem"}, "422": {"$ref": "#/components/responses/Problem"}}
    }},
    "/orders/{order_id}/exchanges": {"post": {
      "operationId": "createExchange", "summary": "Exchange an item of a delivered order for another size or model", "tags": ["orders"],
      "security": [{"poppy": ["poppy:write"]}],
      "parameters": [{"$ref": "#/components/parameters/OrderID"}],
      "requestBody": {"required": true, "content": {"application/json": {"schema": {
        "type": "object", "additionalProperties": false, "required": ["order_id", "item_id", "replacement_sku"],
        "properties": {
          "order_id": {"type": "string", "description": "The order again, as a check: it must equal the path's"},
          "item_id": {"type": "string", "description": "The item to exchange, such as itm_4Qa"},
          "replacement_sku": {"type": "string", "description": "The SKU to get instead, from listProducts"}}}}}},
      "responses": {"201": {"description": "The exchange", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Exchange"}}}},
        "404": {"$ref": "#/components/responses/Problem"}, "409": {"$ref": "#/components/responses/Problem"}, "422": {"$ref": "#/components/responses/Problem"}}
    }},
    "/returns": {"get": {
      "operationId": "listReturns", "summary": "List the account's returns", "tags": ["orders"],
      "security": [{"poppy": ["poppy:read"]}],
      "responses": {"200": {"description": "Returns", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReturnList"}}}}}
    }},
    "/exchanges": {"get": {
      "operationId": "listExchanges", "summary": "List the account's exchanges", "tags": ["orders"],
      "security": [{"poppy": ["poppy:read"]}],
      "responses": {"200": {"description": "Exchanges", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExchangeList"}}}}}
    }}
  },
  "components": {
    "securitySchemes": {"poppy": {"type": "http", "scheme": "DPoP",
      "description": "A DPoP-bound Poppy Session Token with a proof (Poppy 0.1 §4.3); the scopes listed are account scopes."}},
    "parameters": {"OrderID": {"name": "order_id", "in": "path", "required": true, "description": "The order, such as ord_1042", "schema": {"type": "string"}}},
    "responses": {
      "Problem": {"description": "The request cannot be done", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}}},
      "Unauthorized": {"description": "No Session Token, or sign_in_required (WWW-Authenticate)"},
      "Forbidden": {"description": "insufficient_scope, with the scope in WWW-Authenticate"}
    },
    "schemas": {
      "Problem": {"type": "object", "properties": {"error": {"type": "string"}, "error_description": {"type": "string"}}},
      "Product": {"type": "object", "properties": {"sku": {"type": "string"}, "name": {"type": "string"}, "price_usd": {"type": "integer"}}},
      "ProductList": {"type": "object", "properties": {"products": {"type": "array", "items": {"$ref": "#/components/schemas/Product"}}}},
      "Item": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "sku": {"type": "string"},
        "quantity": {"type": "integer"}, "price_usd": {"type": "integer"}}},
      "Order": {"type": "object", "properties": {"id": {"type": "string"}, "summary": {"type": "string"},
        "status": {"type": "string", "enum": ["processing", "shipped", "delivered"]}, "placed_at": {"type": "string", "format": "date-time"},
        "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}},
      "OrderList": {"type": "object", "properties": {"orders": {"type": "array", "items": {"$ref": "#/components/schemas/Order"}}}},
      "Return": {"type": "object", "properties": {"id": {"type": "string"}, "order_id": {"type": "string"}, "reason": {"type": "string"},
        "status": {"type": "string"}, "created_at": {"type": "string", "format": "date-time"}}},
      "ReturnList": {"type": "object", "properties": {"returns": {"type": "array", "items": {"$ref": "#/components/schemas/Return"}}}},
      "Exchange": {"type": "object", "properties": {"id": {"type": "string"}, "order_id": {"type": "string"}, "item_id": {"type": "string"},
        "replacement_sku": {"type": "string"}, "price_difference_usd": {"type": "integer"}, "status": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"}}},
      "ExchangeList": {"type": "object", "properties": {"exchanges": {"type": "array", "items": {"$ref": "#/components/schemas/Exchange"}}}}
    }
  }
}`

// installOpenAPI serves the store API's document and operations, and gives
// the openapi entry of poppy.json its resource when Options.OpenAPIResource
// is set.
func (s *storeAPI) installOpenAPI() {
	api := "api." + s.domain
	doc := storeDocument(s.URL(api, storeBase))
	if s.opts.OpenAPI != nil {
		s.opts.OpenAPI(doc)
	}
	s.setJSONDocument(api, openAPIPath, doc)
	if s.opts.OpenAPIResource != "" {
		s.setOpenAPIResource(s.opts.OpenAPIResource)
	}
	s.installStoreAPI(api)
}

// storeDocument is the store API's document with server as its server.
func storeDocument(server string) map[string]any {
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(openAPIDocument, "{{api}}", server)), &doc); err != nil {
		panic("poppytest: the store API's document: " + err.Error())
	}
	return doc
}

// setOpenAPIResource gives the openapi entry of the served poppy.json whose
// url is the store API's document the resource r, and serves it again.
func (s *storeAPI) setOpenAPIResource(r string) {
	s.mu.Lock()
	served := s.docs[s.domain+poppyJSONPath]
	s.mu.Unlock()
	if served == nil {
		return
	}
	var doc map[string]any
	if json.Unmarshal(served.body, &doc) != nil {
		return // a test serves a broken poppy.json on purpose
	}
	apis, _ := doc["apis"].([]any)
	for _, a := range apis {
		if e, ok := a.(map[string]any); ok && e["type"] == "openapi" && e["url"] == s.openAPIURL() {
			e["resource"] = r
		}
	}
	s.setJSONDocument(s.domain, poppyJSONPath, doc)
	s.setJSONDocument("www."+s.domain, poppyJSONPath, doc)
}

// openAPIURL is the store API document's URL.
func (s *storeAPI) openAPIURL() string { return s.URL("api."+s.domain, openAPIPath) }

// storeResource is the resource of the entry in the served poppy.json of
// the store API whose document is on api (api.<domain>): "" when it has
// none, so any general DPoP Session Token works.
func (s *storeAPI) storeResource(api string) string {
	for _, a := range s.poppyAPIs() {
		if a["type"] == "openapi" && a["url"] == s.URL(api, openAPIPath) {
			r, _ := a["resource"].(string)
			return r
		}
	}
	return ""
}

// YAMLAliasBomb is a 517 KB OpenAPI 3.0 document in YAML, with one operation,
// whose one anchored 505 KB string is repeated by 1,500 aliases: 757 MB of
// text once they are expanded. server is its server URL.
func YAMLAliasBomb(server string) []byte {
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: Alias bomb, version: '1'}\n")
	b.WriteString("servers: [{url: '" + server + "'}]\n")
	b.WriteString("paths:\n  /items:\n    get:\n      operationId: listItems\n      responses: {'200': {description: ok}}\n")
	b.WriteString("x-filler: &big \"" + strings.Repeat("x", 505_000) + "\"\n")
	b.WriteString("x-copies:\n")
	for range 1500 {
		b.WriteString("  - *big\n")
	}
	return []byte(b.String())
}
