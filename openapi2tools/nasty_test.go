package openapi2tools

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
)

// The nasty specs: every document must load, every tool must meet the rules,
// and the output is pinned in a golden file.
func TestNastySpecsGolden(t *testing.T) {
	for _, name := range []string{"recursive", "duplicates", "clashes", "bodies", "broken"} {
		t.Run(name, func(t *testing.T) {
			c := loadFile(t, "testdata/nasty/"+name+".json", &Options{Prefix: "n_"})
			checkCatalog(t, c, "n_")
			golden.Check(t, "testdata/nasty/"+name+".golden", toolsJSON(t, c))
		})
	}
}

func TestRecursiveSchemasAreCut(t *testing.T) {
	c := loadFile(t, "testdata/nasty/recursive.json", nil)
	node := propsOf(t, c, "createNode")
	// Node is expanded once; where it recurs, it is cut with a note.
	for _, recurs := range []any{node["parent"], node["children"].(map[string]any)["items"]} {
		cut := recurs.(map[string]any)
		if cut["type"] != "object" || cut["description"] != "(recursive: Node)" || cut["properties"] != nil {
			t.Errorf("recursion %v, want a cut noting it", cut)
		}
	}
	// Mutual recursion A -> B -> A is cut at the second A.
	b := propsOf(t, c, "createPair")["b"].(map[string]any)
	if a := b["properties"].(map[string]any)["a"].(map[string]any); a["description"] != "(recursive: A)" {
		t.Errorf("mutual recursion: %v", a)
	}
	x := propsOf(t, c, "refLoop")["x"].(map[string]any)
	if !strings.Contains(fmt.Sprint(x), "recursive") {
		t.Errorf("pure $ref loop: %v", x)
	}
}

func TestDuplicateAndMissingOperationIDs(t *testing.T) {
	c := loadFile(t, "testdata/nasty/duplicates.json", &Options{Prefix: "dup_"})
	byRoute := map[string]string{}
	for _, tool := range c.Tools {
		byRoute[tool.Method+" "+tool.Path] = tool.Name
	}
	gets := []string{byRoute["GET /a"], byRoute["POST /a"], byRoute["GET /b"]}
	for i, n := range gets {
		if !strings.HasPrefix(n, "dup_get_") || len(n) != len("dup_get_")+hashLen {
			t.Errorf("duplicate operationId %d named %q, want dup_get_ and a hash", i, n)
		}
	}
	if got := byRoute["DELETE /b"]; got != "dup_delete_b" {
		t.Errorf("no operationId: %q, want dup_delete_b", got)
	}
	if got := byRoute["PUT /c/{id}/d"]; got != "dup_put_c_id_d" {
		t.Errorf("no operationId: %q, want dup_put_c_id_d", got)
	}
	if a, b := byRoute["GET /e"], byRoute["POST /e"]; a == b || !strings.HasPrefix(a, "dup_a_b_") || !strings.HasPrefix(b, "dup_a_b_") {
		t.Errorf("a.b and a_b: %q, %q", a, b)
	}
	if a, b := byRoute["GET /g"], byRoute["POST /g"]; a == b || len(a) != maxToolName || len(b) != maxToolName {
		t.Errorf("long names: %q, %q", a, b)
	}
	// Stable across runs: a second load gives the same names.
	again := loadFile(t, "testdata/nasty/duplicates.json", &Options{Prefix: "dup_"})
	for i := range c.Tools {
		if c.Tools[i].Name != again.Tools[i].Name {
			t.Errorf("name %d changed between runs: %q, %q", i, c.Tools[i].Name, again.Tools[i].Name)
		}
	}
}

func TestClashingArgumentsArePrefixed(t *testing.T) {
	c := loadFile(t, "testdata/nasty/clashes.json", nil)
	props := propsOf(t, c, "updateOrder")
	want := []string{"X-Request-Id", "body_note", "body_order_id", "cookie_session", "filter_status",
		"path_order_id", "quantity", "query_note", "query_session"}
	if got := sortedKeys(props); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("arguments %v, want %v", got, want)
	}
	req := schemaOf(t, c, "updateOrder")["required"]
	if fmt.Sprint(req) != "[path_order_id body_order_id quantity]" {
		t.Errorf("required %v", req)
	}
}

func TestBodies(t *testing.T) {
	c := loadFile(t, "testdata/nasty/bodies.json", nil)
	oneOf := propsOf(t, c, "oneOfBody")["body"].(map[string]any)
	if _, ok := oneOf["oneOf"]; !ok || !strings.HasPrefix(oneOf["description"].(string), "One of: A cat; object (bark, name)") {
		t.Errorf("oneOf body %v", oneOf)
	}
	if b := propsOf(t, c, "arrayBody")["body"].(map[string]any); b["type"] != "array" {
		t.Errorf("array body %v", b)
	}
	if b := propsOf(t, c, "textBody")["body"].(map[string]any); b["type"] != "string" {
		t.Errorf("text body %v", b)
	}
	all := schemaOf(t, c, "allOfBody")
	if fmt.Sprint(sortedKeys(all["properties"].(map[string]any))) != "[meow name owner]" || fmt.Sprint(all["required"]) != "[meow owner]" {
		t.Errorf("allOf body not merged: %v", all)
	}
	code := propsOf(t, c, "bigEnum")["code"].(map[string]any)
	if _, ok := code["enum"]; ok || !strings.Contains(code["description"].(string), "one of 300 values, e.g. v000, v001, v002") {
		t.Errorf("big enum kept or not noted: %v", code)
	}
	if small := propsOf(t, c, "bigEnum")["small"].(map[string]any); fmt.Sprint(small["enum"]) != "[a b]" {
		t.Errorf("small enum %v", small)
	}
	odd := propsOf(t, c, "oddKeywords")
	if n := odd["n"].(map[string]any); fmt.Sprint(n["type"]) != "[null number]" || n["exclusiveMinimum"] != 0.0 {
		t.Errorf("3.0 nullable/exclusiveMinimum not rewritten: %v", n)
	}
	if f := propsOf(t, c, "upload")["file"].(map[string]any); f["type"] != "string" || f["format"] != nil {
		t.Errorf("multipart file %v", f)
	}
	if _, ok := propsOf(t, c, "mixedMedia")["a"]; !ok {
		t.Error("JSON was not preferred over XML")
	}
}

func TestBrokenRefsAreSkippedWithReasons(t *testing.T) {
	c := loadFile(t, "testdata/nasty/broken.json", nil)
	var got []string
	for _, s := range c.Skipped {
		got = append(got, s.Operation)
	}
	want := "[GET /bad-in (badIn) GET /bad-param (badParam) POST /bad-schema (badSchema) GET /bad-server (badServer) GET /no-name (noName) * /not-an-object GET /params-string]"
	if fmt.Sprint(got) != want {
		t.Errorf("skipped %v\nwant    %s", got, want)
	}
	for _, s := range c.Skipped {
		if s.Reason == "" {
			t.Errorf("%s skipped without a reason", s.Operation)
		}
	}
	for _, name := range []string{"external", "escapedRef", "implicitPath"} {
		if _, ok := c.Tool(name); !ok {
			t.Errorf("%s missing", name)
		}
	}
	// /path-ref is a $ref to /good's path item: two operations named "good",
	// both kept under de-duplicated names.
	var goods []string
	for _, tool := range c.Tools {
		if tool.OperationID == "good" {
			goods = append(goods, tool.Method+" "+tool.Path+" "+tool.Name[:5])
		}
	}
	if fmt.Sprint(goods) != "[GET /good good_ GET /path-ref good_]" {
		t.Errorf("operations with operationId good: %v", goods)
	}
	if _, ok := propsOf(t, c, "escapedRef")["q"]; !ok {
		t.Error("a $ref with an escaped JSON Pointer was not followed")
	}
	if _, ok := propsOf(t, c, "implicitPath")["thing"]; !ok {
		t.Error("a path template variable with no parameter got no argument")
	}
}

// deepInline nests n object schemas inline in a request body.
func deepInline(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi":"3.1.0","paths":{"/deep":{"post":{"operationId":"deep","requestBody":{"content":{"application/json":{"schema":`)
	for range n {
		b.WriteString(`{"type":"object","properties":{"a":`)
	}
	b.WriteString(`{"type":"string"}`)
	b.WriteString(strings.Repeat("}}", n))
	b.WriteString(`}}}}}}}`)
	return []byte(b.String())
}

// deepRefs chains n component schemas, each a property referring to the next.
func deepRefs(n int) []byte {
	s := map[string]any{}
	for i := range n {
		s[fmt.Sprintf("S%d", i)] = map[string]any{"type": "object", "properties": map[string]any{
			"next": map[string]any{"$ref": fmt.Sprintf("#/components/schemas/S%d", i+1)}}}
	}
	s[fmt.Sprintf("S%d", n)] = map[string]any{"$ref": "#/components/schemas/S0"}
	doc := map[string]any{"openapi": "3.1.0", "components": map[string]any{"schemas": s},
		"paths": map[string]any{"/deep": map[string]any{"post": map[string]any{"operationId": "deep",
			"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"$ref": "#/components/schemas/S0"}}}}}}}}
	b, _ := json.Marshal(doc)
	return b
}

func TestTenThousandDeep(t *testing.T) {
	// Inline: encoding/json refuses nesting past 10,000 with an error, or the
	// schema is cut; either way no crash.
	for _, n := range []int{100, 10000} {
		c, err := Load(context.Background(), deepInline(n), "https://api.example.com/", nil)
		if err != nil {
			t.Logf("inline depth %d: %v", n, err)
			continue
		}
		checkCatalog(t, c, "")
		if len(c.Tools) == 1 && !strings.Contains(string(c.Tools[0].InputSchema), "nested schema omitted") {
			t.Errorf("inline depth %d not cut: %.300s", n, c.Tools[0].InputSchema)
		}
	}
	// Through $refs: loads, and the schema is cut at the depth bound.
	c := load(t, deepRefs(10000), nil)
	checkCatalog(t, c, "")
	if s := string(c.Tools[0].InputSchema); !strings.Contains(s, "nested schema omitted") || len(s) > 4096 {
		t.Errorf("deep $ref chain: %d bytes: %.300s", len(s), s)
	}
}

func TestExponentialSharingIsBounded(t *testing.T) {
	// 30 levels, each with 4 properties referring to the next: 4^30 nodes if
	// inlined naively.
	s := map[string]any{}
	for i := range 30 {
		next := map[string]any{"$ref": fmt.Sprintf("#/components/schemas/L%d", i+1)}
		s[fmt.Sprintf("L%d", i)] = map[string]any{"type": "object", "properties": map[string]any{"a": next, "b": next, "c": next, "d": next}}
	}
	s["L30"] = map[string]any{"type": "string"}
	doc, _ := json.Marshal(map[string]any{"openapi": "3.1.0", "components": map[string]any{"schemas": s},
		"paths": map[string]any{"/x": map[string]any{"post": map[string]any{"requestBody": map[string]any{
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/L0"}}}}}}}})
	c := load(t, doc, nil)
	checkCatalog(t, c, "")
	if n := len(c.Tools[0].InputSchema); n > 1<<20 {
		t.Errorf("schema is %d bytes", n)
	}
}

func manyOperations(n int) []byte {
	paths := map[string]any{}
	for i := range n {
		paths[fmt.Sprintf("/things/%d/{id}", i)] = map[string]any{
			"get":    map[string]any{"operationId": "getThing", "parameters": []any{map[string]any{"name": "id", "in": "path", "required": true}}},
			"delete": map[string]any{},
		}
	}
	b, _ := json.Marshal(map[string]any{"openapi": "3.1.0", "paths": paths})
	return b
}

func TestHugeNumberOfOperations(t *testing.T) {
	c := load(t, manyOperations(5000), &Options{Prefix: "big_"})
	if len(c.Tools) != 10000 || len(c.Skipped) != 0 {
		t.Fatalf("%d tools, %d skipped", len(c.Tools), len(c.Skipped))
	}
	checkCatalog(t, c, "big_")
	capped := load(t, manyOperations(100), &Options{MaxOperations: 50})
	if len(capped.Tools) != 50 || len(capped.Skipped) != 150 || !strings.Contains(capped.Skipped[0].Reason, "more than 50") {
		t.Errorf("cap: %d tools, %d skipped", len(capped.Tools), len(capped.Skipped))
	}
}

func TestLoadMemoryIsBounded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	load(t, deepRefs(2000), nil)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("loading a 2,000-deep $ref chain allocated %d MB", alloc>>20)
	}
}
