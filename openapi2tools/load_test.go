package openapi2tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
)

func TestPetstoreGolden(t *testing.T) {
	c := loadFile(t, "testdata/petstore.json", &Options{Prefix: "ex_"})
	checkCatalog(t, c, "ex_")
	golden.Check(t, "testdata/petstore.golden", toolsJSON(t, c))
	if c.Title != "Swagger Petstore" || len(c.Skipped) != 0 {
		t.Errorf("title %q, skipped %v", c.Title, c.Skipped)
	}
	if want := []string{"petstore.example.com"}; !cmp.Equal(c.Hosts, want) {
		t.Errorf("hosts %v, want %v", c.Hosts, want)
	}
}

func TestToolMarshalsToMCPShape(t *testing.T) {
	c := loadFile(t, "testdata/petstore.json", nil)
	tool, ok := c.Tool("showPetById")
	if !ok {
		t.Fatal("no showPetById")
	}
	b, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	if want := []string{"annotations", "description", "inputSchema", "name"}; !cmp.Equal(sortedKeys(m), want) {
		t.Errorf("Tool JSON keys %v, want %v", keys, want)
	}
	if got := string(m["annotations"]); got != `{"title":"Info for a specific pet","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":true}` {
		t.Errorf("annotations %s", got)
	}
}

func TestAnnotationsByMethod(t *testing.T) {
	tests := []struct {
		method                                    string
		readOnly, destructive, idempotent, opened bool
	}{
		{"GET", true, false, true, true},
		{"HEAD", true, false, true, true},
		{"DELETE", false, true, true, true},
		{"PUT", false, false, true, true},
		{"POST", false, false, false, true},
		{"PATCH", false, false, false, true},
	}
	for _, tt := range tests {
		a := annotations(tt.method, "")
		got := []bool{*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint}
		if want := []bool{tt.readOnly, tt.destructive, tt.idempotent, tt.opened}; !cmp.Equal(got, want) {
			t.Errorf("%s: readOnly, destructive, idempotent, openWorld = %v, want %v", tt.method, got, want)
		}
	}
}

const petstoreYAML = `
openapi: "3.0.0"
info: {title: Swagger Petstore, version: 1.0.0}
servers:
  - url: https://petstore.example.com/v1
paths:
  /pets/{petId}:
    get:
      operationId: showPetById
      summary: Info for a specific pet
      parameters:
        - name: petId
          in: path
          required: true
          description: The id of the pet to retrieve
          schema: {type: string}
      responses:
        "200": {description: ok}
`

func TestYAMLMatchesJSON(t *testing.T) {
	y := load(t, []byte(petstoreYAML), nil)
	j := loadFile(t, "testdata/petstore.json", nil)
	yt, _ := y.Tool("showPetById")
	jt, ok := j.Tool("showPetById")
	if !ok || yt == nil {
		t.Fatalf("showPetById missing: yaml %v json %v", yt != nil, ok)
	}
	if diff := cmp.Diff(string(jt.InputSchema), string(yt.InputSchema)); diff != "" {
		t.Errorf("YAML and JSON schemas differ:\n%s", diff)
	}
}

const swagger2 = `{
  "swagger": "2.0",
  "info": {"title": "Old API", "version": "1"},
  "host": "old.example.com",
  "basePath": "/api",
  "schemes": ["https"],
  "paths": {
    "/items/{id}": {
      "put": {
        "operationId": "putItem",
        "consumes": ["application/json"],
        "parameters": [
          {"name": "id", "in": "path", "required": true, "type": "string"},
          {"name": "tags", "in": "query", "type": "array", "items": {"type": "string"}, "collectionFormat": "csv"},
          {"name": "item", "in": "body", "required": true, "schema": {"$ref": "#/definitions/Item"}}
        ],
        "responses": {"200": {"description": "ok"}}
      }
    }
  },
  "definitions": {
    "Item": {"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}, "id": {"type": "string"}}}
  }
}`

func TestSwagger2Converted(t *testing.T) {
	c := load(t, []byte(swagger2), nil)
	checkCatalog(t, c, "")
	props := propsOf(t, c, "putItem")
	// The body field "id" clashes with the path parameter "id".
	for _, name := range []string{"path_id", "body_id", "tags", "title"} {
		if _, ok := props[name]; !ok {
			t.Errorf("argument %q missing; have %v", name, sortedKeys(props))
		}
	}
	req, err := c.NewRequest(context.Background(), "putItem", map[string]any{
		"path_id": "7", "body_id": "x", "title": "T", "tags": []any{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := req.URL.String(), "https://old.example.com/api/items/7?tags=a,b"; got != want {
		t.Errorf("URL %s, want %s", got, want)
	}
}

func TestLoadRejects(t *testing.T) {
	tests := map[string]string{
		"empty":        "",
		"not json":     "{nope",
		"no version":   `{"paths": {}}`,
		"openapi 4":    `{"openapi": "4.0.0"}`,
		"yaml scalar":  "just text",
		"paths array":  `{"openapi": "3.1.0", "paths": []}`,
		"version type": `{"openapi": 3}`,
	}
	for name, doc := range tests {
		_, err := Load(context.Background(), []byte(doc), "", nil)
		if !errors.Is(err, ErrInvalidDocument) {
			t.Errorf("%s: err %v, want ErrInvalidDocument", name, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "openapi2tools: ") {
			t.Errorf("%s: message %q does not start with the package name", name, err)
		}
	}
	if _, err := Load(context.Background(), []byte(`{"openapi":"3.1.0"}`), "", &Options{Prefix: "bad prefix!"}); err == nil {
		t.Error("a prefix with invalid characters was accepted")
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	doc := `{"openapi":"3.1.0","paths":{"/a":{"get":{}}}}`
	if _, err := Load(ctx, []byte(doc), "", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func TestServers(t *testing.T) {
	doc := `{"openapi": "3.0.3",
	  "servers": [{"url": "https://{region}.api.example.com:{port}/{base}", "variables": {
	    "region": {"default": "eu", "enum": ["eu", "us"]}, "port": {"default": "8443"}, "base": {"default": "v2"}}},
	    {"url": "https://mirror.example.com"}],
	  "paths": {
	    "/a": {"get": {"operationId": "a"}},
	    "/b": {"servers": [{"url": "/relative"}], "get": {"operationId": "b"},
	           "post": {"operationId": "c", "servers": [{"url": "https://ops.example.com/x/"}]}}}}`
	c := load(t, []byte(doc), nil)
	want := map[string]string{
		"a": "https://eu.api.example.com:8443/v2/a",
		"b": "https://api.example.com/relative/b",
		"c": "https://ops.example.com/x/b",
	}
	for name, u := range want {
		req, err := c.NewRequest(context.Background(), name, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if req.URL.String() != u {
			t.Errorf("%s: URL %s, want %s", name, req.URL, u)
		}
	}
	wantHosts := []string{"api.example.com", "eu.api.example.com:8443", "mirror.example.com", "ops.example.com"}
	if !cmp.Equal(c.Hosts, wantHosts) {
		t.Errorf("hosts %v, want %v", c.Hosts, wantHosts)
	}
}

func TestRelativeServerWithoutDocURL(t *testing.T) {
	doc := `{"openapi": "3.1.0", "paths": {"/a": {"get": {"operationId": "a"}}}}`
	c, err := Load(context.Background(), []byte(doc), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewRequest(context.Background(), "a", nil); !errors.Is(err, ErrNoServer) {
		t.Errorf("err %v, want ErrNoServer", err)
	}
}

func TestDescriptionsTrimmed(t *testing.T) {
	long := strings.Repeat("word ", 200)
	doc := `{"openapi": "3.1.0", "paths": {"/a": {"post": {"operationId": "a", "summary": "Do a thing",
	  "description": "` + long + `",
	  "parameters": [{"name": "q", "in": "query", "description": "` + long + `", "schema": {"type": "string"}}]}}}}`
	c := load(t, []byte(doc), &Options{MaxDescription: 100})
	tool := &c.Tools[0]
	if n := len([]rune(tool.Description)); n > 100 || !strings.HasPrefix(tool.Description, "POST /a. Do a thing. word") {
		t.Errorf("description (%d runes) %q", n, tool.Description)
	}
	d := propsOf(t, c, "a")["q"].(map[string]any)["description"].(string)
	if n := len([]rune(d)); n > propertyDescription || !strings.HasSuffix(d, "…") {
		t.Errorf("property description (%d runes) %q", n, d)
	}
}

func TestTrimText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"  many\n\n spaces\there ", 40, "many spaces here"},
		{"one two three four five", 12, "one two…"},
		{"ünïcödé ünïcödé ünïcödé", 10, "ünïcödé…"},
		{"abcdefghijklmnopqrstuvwxyz", 10, "abcdefghi…"},
	}
	for _, tt := range tests {
		if got := trimText(tt.in, tt.max); got != tt.want {
			t.Errorf("trimText(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// The top level and the containers a reference walks through alias the
// document rather than copying it, and split it exactly as encoding/json does.
func TestObjectMembersAlias(t *testing.T) {
	doc := []byte(` { "a\"}" : "}\\" , "b":[1, {"c":"]"} ,null],"n":-1.5e3,"t":true, "a\"}":{"x":"{"} } `)
	m, err := objectMembers(doc)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(doc, &want); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(m, want) {
		t.Errorf("objectMembers = %q, want %q", m, want)
	}
	for k, v := range m {
		if !aliases(doc, v) {
			t.Errorf("member %q is a copy, not a slice of the document", k)
		}
	}
	arr, err := arrayElements(m["b"])
	if err != nil || len(arr) != 3 || string(arr[1]) != `{"c":"]"}` || string(arr[2]) != "null" {
		t.Errorf("arrayElements = %q, %v", arr, err)
	}
}

// aliases reports whether part lies inside whole's memory.
func aliases(whole, part []byte) bool {
	for i := range whole {
		if &whole[i] == &part[0] {
			return true
		}
	}
	return false
}

// sizedDocument is a valid document of n bytes with one operation.
func sizedDocument(n int) []byte {
	doc := `{"openapi":"3.0.0","info":{"title":"t","version":"1","description":"%s"},"paths":{"/a":{"get":{"operationId":"a"}}}}`
	return []byte(fmt.Sprintf(doc, strings.Repeat("x", n-len(doc)+2)))
}

// A document over MaxDocumentBytes is refused before anything is read.
func TestLoadRefusesOverLimit(t *testing.T) {
	_, err := Load(context.Background(), make([]byte, MaxDocumentBytes+1), "", nil)
	if !errors.Is(err, ErrInvalidDocument) || !strings.Contains(err.Error(), "over the limit of 64 MiB") {
		t.Fatalf("Load of 64 MiB + 1 = %v", err)
	}
	if len(sizedDocument(2<<20)) != 2<<20 {
		t.Fatal("sizedDocument")
	}
}

// Large documents translate while the bytes being translated stay within
// MaxDocumentBytes: with a 45 MiB translation under way (the test holds its
// share), a 20 MiB one waits (here until its context is done, without being
// read), and so do 5 MiB of YAML, while a 2 MiB one goes ahead, and so does a
// small one; once the large one is done, the 20 MiB one translates.
func TestLargeDocumentsWaitForEachOther(t *testing.T) {
	held := int64(45 << 20)
	if err := translating.Acquire(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			translating.Release(held)
			released = true
		}
	}
	defer release()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	big := sizedDocument(20 << 20)
	if _, err := Load(done, big, "", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("20 MiB beside 45 MiB: %v, want it to wait until its context is done", err)
	}
	for _, n := range []int{2 << 20, 4 << 10} {
		if c, err := Load(context.Background(), sizedDocument(n), "", nil); err != nil || len(c.Tools) != 1 {
			t.Fatalf("%d bytes beside 45 MiB: %v", n, err)
		}
	}
	// A YAML document weighs four times its size: 5 MiB of YAML is 20 MiB.
	yamlDoc := append([]byte("openapi: 3.0.0\npaths: {}\ninfo:\n  title: t\n  description: "), bytes.Repeat([]byte("x"), 5<<20)...)
	if _, err := Load(done, yamlDoc, "", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("5 MiB of YAML beside 45 MiB: %v, want it to wait", err)
	}
	release()
	if c, err := Load(context.Background(), big, "", nil); err != nil || len(c.Tools) != 1 {
		t.Fatalf("20 MiB alone: %v", err)
	}
}
