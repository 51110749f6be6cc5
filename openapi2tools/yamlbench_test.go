package openapi2tools

import (
	"bytes"
	"context"
	"os"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// The YAML expansion bound's benchmarks (BENCHMARKS.md, "YAML expansion
// bound"), each run once in a process of its own by
// scripts/bench-yaml-bound.sh, so that its peakRSS-MiB is its alone. Each
// document has its plain decode (the YAML library's decode into an any) as
// its baseline.

// BenchmarkYAMLBombLoad refuses the 517 KB alias bomb.
func BenchmarkYAMLBombLoad(b *testing.B) {
	data := poppytest.YAMLAliasBomb("https://api.example.com")
	benchLarge(b, data, func() error {
		if _, err := Load(context.Background(), data, "", nil); err == nil {
			b.Fatal("the bomb was translated")
		}
		return nil
	})
}

// BenchmarkYAMLBombDecode is its baseline.
func BenchmarkYAMLBombDecode(b *testing.B) {
	benchPlainDecode(b, poppytest.YAMLAliasBomb("https://api.example.com"))
}

// largeYAML is the large legitimate YAML document the script renders
// (Microsoft Graph's beta description, 54 MiB in YAML), or a skip.
func largeYAML(b *testing.B) []byte {
	path := os.Getenv("POPPY_BENCH_LARGE_YAML")
	if path == "" {
		b.Skip("POPPY_BENCH_LARGE_YAML names no document (scripts/bench-yaml-bound.sh renders one)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkYAMLLargeConvert converts the large document to JSON, bounded.
func BenchmarkYAMLLargeConvert(b *testing.B) {
	data := largeYAML(b)
	benchLarge(b, data, func() error {
		_, err := yamlToJSON(data)
		return err
	})
}

// BenchmarkYAMLLargeUnbounded is the conversion before the bound (the plain
// decode, then json.Marshal), for comparison.
func BenchmarkYAMLLargeUnbounded(b *testing.B) {
	data := largeYAML(b)
	benchLarge(b, data, func() error {
		_, err := decodeYAMLToJSON(data)
		return err
	})
}

// BenchmarkYAMLLargeLoad translates it: the conversion, then the catalog.
func BenchmarkYAMLLargeLoad(b *testing.B) {
	data := largeYAML(b)
	benchLarge(b, data, func() error {
		_, err := Load(context.Background(), data, "https://graph.microsoft.com/beta/openapi.yaml", nil)
		return err
	})
}

// BenchmarkYAMLLargeDecode is their baseline.
func BenchmarkYAMLLargeDecode(b *testing.B) { benchPlainDecode(b, largeYAML(b)) }

func benchPlainDecode(b *testing.B, data []byte) {
	benchLarge(b, data, func() error {
		var v any
		return yaml.Unmarshal(data, &v)
	})
}

// atTheBound is a 16 MiB YAML document whose aliases expand it to the
// bound: a sequence of 1.86 Mi four-byte strings, anchored and aliased 7
// times, 14.9 Mi nodes and 59.6 MiB of text once expanded (the bound there:
// 16 Mi nodes, 64 MiB).
func atTheBound() []byte {
	var b bytes.Buffer
	b.WriteString("openapi: 3.0.3\ninfo: {title: At the bound, version: '1'}\npaths:\n  /items:\n    get:\n      operationId: listItems\n")
	b.WriteString("x-strings: &s\n")
	for b.Len() < 16<<20-200 {
		b.WriteString("  - abcd\n")
	}
	b.WriteString("x-aliases: [*s, *s, *s, *s, *s, *s, *s]\n")
	return b.Bytes()
}

// BenchmarkYAMLAtBoundLoad translates the document at the bound.
func BenchmarkYAMLAtBoundLoad(b *testing.B) {
	data := atTheBound()
	benchLarge(b, data, func() error {
		_, err := Load(context.Background(), data, "https://api.example.com/openapi.yaml", nil)
		return err
	})
}

// BenchmarkYAMLAtBoundParse is its baseline: the YAML library refuses to
// decode it into an any ("document contains excessive aliasing", a ratio of
// aliased to all values it counts), so the baseline is its parse into the
// node tree, which yamlToJSON starts with.
func BenchmarkYAMLAtBoundParse(b *testing.B) {
	data := atTheBound()
	benchLarge(b, data, func() error {
		var n yaml.Node
		return yaml.Unmarshal(data, &n)
	})
}
