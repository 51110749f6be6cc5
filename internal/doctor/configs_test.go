package doctor

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestStripJSONC: comments and trailing commas go, strings stay as they are.
func TestStripJSONC(t *testing.T) {
	for in, want := range map[string]any{
		`{"a": 1, // one
		  "b": [1, 2,], /* two, */ }`: map[string]any{"a": 1.0, "b": []any{1.0, 2.0}},
		`{"url": "https://x//y", "c": "/* not a comment */", "q": "\"//\""}`: map[string]any{"url": "https://x//y", "c": "/* not a comment */", "q": `"//"`},
		`[1,/*x*/]`: []any{1.0},
	} {
		var got any
		if err := json.Unmarshal(stripJSONC([]byte(in)), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("stripJSONC(%s) = %s: %v, %v", in, stripJSONC([]byte(in)), got, err)
		}
	}
}

// FuzzStripJSONC: JSON comes back meaning the same, and nothing panics.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,],}`, `{"s":"a//b\"/*"}`, `// c`, `/* open`, `"open`, `{"x":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := stripJSONC(b)
		if !json.Valid(b) {
			return
		}
		var want, got any
		json.Unmarshal(b, &want)
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("JSON %q came back as %q", b, out)
		}
	})
}

// FuzzParseConfig: any bytes in any dialect give a document or a message,
// never a panic; what strict JSON takes, JSONC takes the same.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{`{"mcpServers":{}}`, `{"servers":{"p":{"command":"poppy-mcp",},},}`, "{/* c */}", `{"a":"//x"}`, `[1,]`, `{"a":"\`, "// only"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		strict, msg := parseConfig(configPlace{App: "Cursor", Dialect: DialectJSON}, b)
		loose, _ := parseConfig(configPlace{App: "VS Code", Dialect: DialectJSONC}, b)
		if strict == nil && msg == "" {
			t.Fatal("no document and no message")
		}
		if strict != nil && len(loose) != len(strict) {
			t.Errorf("strict JSON %q has %d keys, as JSONC %d", b, len(strict), len(loose))
		}
	})
}
