package openapi2tools

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// toolsJSON is what `poppy-mcp openapi --json` prints: {"tools": [...]},
// plus the skipped operations, indented for review.
func toolsJSON(t *testing.T, c *Catalog) []byte {
	t.Helper()
	out, err := json.MarshalIndent(struct {
		Tools   []Tool `json:"tools"`
		Skipped []Skip `json:"skipped,omitempty"`
	}{c.Tools, c.Skipped}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func load(t testing.TB, data []byte, opts *Options) *Catalog {
	t.Helper()
	c, err := Load(context.Background(), data, "https://api.example.com/openapi.json", opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func loadFile(t testing.TB, path string, opts *Options) *Catalog {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return load(t, data, opts)
}

var (
	toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	argNamePattern  = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)
)

// checkCatalog asserts the rules every tool of every document must meet.
func checkCatalog(t *testing.T, c *Catalog, prefix string) {
	t.Helper()
	seen := map[string]bool{}
	for i := range c.Tools {
		tool := &c.Tools[i]
		if !toolNamePattern.MatchString(tool.Name) || !strings.HasPrefix(tool.Name, prefix) {
			t.Errorf("tool name %q does not match the pattern after prefix %q", tool.Name, prefix)
		}
		if seen[tool.Name] {
			t.Errorf("tool name %q is not unique", tool.Name)
		}
		seen[tool.Name] = true
		if n := len([]rune(tool.Description)); n > defaultMaxDescription || n == 0 {
			t.Errorf("%s: description has %d characters", tool.Name, n)
		}
		a := tool.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations not all set: %+v", tool.Name, a)
		}
		checkInputSchema(t, tool)
	}
}

// checkInputSchema asserts the shape clients require and that the schema
// compiles under JSON Schema 2020-12.
func checkInputSchema(t *testing.T, tool *Tool) {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(tool.InputSchema, &top); err != nil {
		t.Fatalf("%s: input schema: %v", tool.Name, err)
	}
	if top["type"] != "object" {
		t.Errorf("%s: input schema type is %v", tool.Name, top["type"])
	}
	props, ok := top["properties"].(map[string]any)
	if !ok {
		t.Errorf("%s: input schema has no properties object", tool.Name)
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf", "$ref"} {
		if _, ok := top[k]; ok {
			t.Errorf("%s: input schema has top-level %s", tool.Name, k)
		}
	}
	for name := range props {
		if !argNamePattern.MatchString(name) {
			t.Errorf("%s: argument name %q does not match %s", tool.Name, name, argNamePattern)
		}
	}
	if len(props) != len(tool.args) {
		t.Errorf("%s: %d properties but %d routed arguments", tool.Name, len(props), len(tool.args))
	}
	compileSchema(t, tool.Name, tool.InputSchema)
}

// compiled remembers schemas that compiled, so a catalog of 10,000 alike
// tools compiles each distinct schema once.
var compiled sync.Map

func compileSchema(t *testing.T, name string, schema []byte) {
	t.Helper()
	if _, ok := compiled.Load(string(schema)); ok {
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(compileECMA)
	if err := c.AddResource("tool.json", doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := c.Compile("tool.json"); err != nil {
		t.Errorf("%s: input schema does not compile: %v\n%s", name, err, schema)
		return
	}
	compiled.Store(string(schema), true)
}

// schemaOf returns a tool's input schema decoded.
func schemaOf(t *testing.T, c *Catalog, name string) map[string]any {
	t.Helper()
	tool, ok := c.Tool(name)
	if !ok {
		var names []string
		for _, x := range c.Tools {
			names = append(names, x.Name)
		}
		t.Fatalf("no tool %q; have %v", name, names)
	}
	var m map[string]any
	if err := json.Unmarshal(tool.InputSchema, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func propsOf(t *testing.T, c *Catalog, name string) map[string]any {
	t.Helper()
	p, _ := schemaOf(t, c, name)["properties"].(map[string]any)
	return p
}

// compileECMA stands in for a regexp engine in the schema compiler: a
// pattern's dialect is ECMA-262, which Go's regexp is not, so a pattern is
// checked with this package's reading of Unicode mode (which
// TestECMAPatternNode holds to Node's) and never used to match.
func compileECMA(p string) (jsonschema.Regexp, error) {
	if _, err := readPattern(p, false); err != nil {
		return nil, err
	}
	return ecmaRegexp(p), nil
}

type ecmaRegexp string

func (r ecmaRegexp) String() string { return string(r) }

func (r ecmaRegexp) MatchString(string) bool { panic("openapi2tools tests: ecmaRegexp does not match") }
