package main

// This file assembles the admin API's OpenAPI 3.1 document, served at
// GET /admin/openapi.json: openapi.json describes the fixed routes, and the
// tables of knobs.go and faults.go add the options' schema and a path per
// fault, so the document follows the tables. A test checks that it is
// valid and that its operations are exactly the routes registered.

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed openapi.json
var openAPIBase []byte

// openAPIDocument is the document for an admin API at origin, such as
// http://127.0.0.1:41234.
func openAPIDocument(origin string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIBase, &doc); err != nil {
		return nil, fmt.Errorf("the admin API's document: %w", err)
	}
	doc["servers"] = []any{map[string]any{"url": origin}}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	props := schemas["Options"].(map[string]any)["properties"].(map[string]any)
	for _, o := range options {
		s := o.typ.schema()
		for k, v := range o.extra {
			s[k] = v
		}
		s["description"] = o.doc
		props[o.name] = s
	}
	paths := doc["paths"].(map[string]any)
	for _, f := range faults {
		paths["/admin/runs/{run}/faults/"+f.name] = faultPath(f)
	}
	return json.MarshalIndent(doc, "", "  ")
}

// faultPath is the path item of a fault's route.
func faultPath(f fault) map[string]any {
	props, required := map[string]any{}, []any{}
	for _, p := range f.params {
		s := p.typ.schema()
		if p.typ == typeInt {
			s["minimum"] = 0
		}
		s["description"] = p.doc
		props[p.name] = s
		if p.required {
			required = append(required, p.name)
		}
	}
	body := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		body["required"] = required
	}
	errRef := func(name string) map[string]any { return map[string]any{"$ref": "#/components/responses/" + name} }
	return map[string]any{
		"parameters": []any{map[string]any{"$ref": "#/components/parameters/Run"}},
		"post": map[string]any{
			"operationId": "fault_" + f.name,
			"summary":     f.doc,
			"tags":        []any{"faults"},
			"requestBody": map[string]any{"required": len(required) > 0, "content": map[string]any{"application/json": map[string]any{"schema": body}}},
			"responses": map[string]any{
				"200": map[string]any{"description": "Done", "content": map[string]any{"application/json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/FaultResult"}}}},
				"400": errRef("BadRequest"), "404": errRef("NotFound"), "409": errRef("Conflict"),
			},
		},
	}
}
