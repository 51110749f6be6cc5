package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// FuzzArgSchema: whatever schema a Company's document gives an operation and
// whatever arguments a client sends, checking them never panics, and an
// error names what does not fit.
func FuzzArgSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"status":{"type":"string","enum":["a","b"]}},"additionalProperties":false}`, `{"statuss":"a"}`)
	f.Add(`{"type":"object","required":["x"],"properties":{"x":{"type":"integer","minimum":1}}}`, `{"x":0.5}`)
	f.Add(`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`, `{}`)
	f.Add(`{"type":"object","properties":{"p":{"pattern":"[\\w-.]"}}}`, `{"p":"x"}`)
	f.Add(`not json`, `null`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		var v any
		if json.Unmarshal([]byte(args), &v) != nil {
			return
		}
		if err := newArgSchema(json.RawMessage(schema)).checkValue(v); err != nil && err.Error() == "" {
			t.Fatalf("an empty error for %s against %s", args, schema)
		}
	})
}

// TestNearest: a slip of a letter or two finds the argument meant; a name
// far from every known one finds none.
func TestNearest(t *testing.T) {
	t.Parallel()
	known := []string{"domain", "refresh", "scopes"}
	for name, want := range map[string]string{"scope": "scopes", "Domian": "domain", "txet": "", "refesh": "refresh", "bogus_arg": "", "x": ""} {
		if got, ok := nearest(name, known); (want == "" && ok) || (want != "" && got != want) {
			t.Errorf("nearest(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// BenchmarkOperationSchema measures what checking an operation's arguments
// costs with GitHub's document (scripts/fetch-openapi-specs.sh; else the
// store API's): compiling one operation's schema on its first call, a later
// call that finds it compiled, and compiling every operation's, which is
// what compiling them when the catalog is listed would cost.
func BenchmarkOperationSchema(b *testing.B) {
	co, start := benchCompany(b)
	s := start()
	apis := s.apis.load(context.Background(), co)
	cat := apis[0].cat
	if cat == nil {
		b.Fatal(apis[0].err)
	}
	op, _ := cat.Tool(cat.Tools[len(cat.Tools)/2].Name)
	args := map[string]any{}
	b.Run("first-call", func(b *testing.B) {
		for b.Loop() {
			if err := newArgSchema(op.InputSchema).checkValue(args); err != nil && !strings.Contains(err.Error(), "required") {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached-call", func(b *testing.B) {
		for b.Loop() {
			_ = s.apis.operationSchema(op).checkValue(args)
		}
	})
	b.Run("every-operation", func(b *testing.B) {
		for b.Loop() {
			t0 := time.Now()
			for i := range cat.Tools {
				_ = newArgSchema(cat.Tools[i].InputSchema).compile()
			}
			b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms/catalog")
			b.ReportMetric(float64(len(cat.Tools)), "operations")
		}
	})
}

// TestBuiltinSchemasCompile: every built-in tool's published schema
// compiles, so none of them goes unchecked (check lets a schema that does
// not compile through, for a Company's operations).
func TestBuiltinSchemasCompile(t *testing.T) {
	t.Parallel()
	s := New(discovery.New(http.DefaultClient, nil), nil)
	defer s.Close()
	all := s.tools(true)
	if len(all) < 15 {
		t.Fatalf("%d built-in tools", len(all))
	}
	for _, tl := range all {
		if err := newArgSchema(tl.tool.RawInputSchema).compile(); err != nil {
			t.Errorf("%s: %v", tl.tool.Name, err)
		}
	}
}
