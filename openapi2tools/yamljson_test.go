package openapi2tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// decodeYAMLToJSON is the conversion yamlToJSON replaced, and must agree
// with: the YAML library's decode into an any, then json.Marshal. It follows
// aliases without a bound, so it is only run on documents within it.
func decodeYAMLToJSON(data []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return json.Marshal(jsonable(v))
}

// sameConversion fails t unless yamlToJSON and the plain decode agree on
// data: both refuse it, or both give the same bytes. A document yamlToJSON
// refuses for its expansion is not decoded.
func sameConversion(t *testing.T, data []byte) {
	t.Helper()
	got, err := yamlToJSON(data)
	if err != nil && strings.Contains(err.Error(), "YAML alias expansion") {
		return
	}
	want, werr := decodeYAMLToJSON(data)
	if err == nil && werr != nil && strings.Contains(werr.Error(), "excessive aliasing") {
		return // the library's ratio of aliased values, which the bound replaces
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("yamlToJSON: %v; the plain decode: %v\n%q", err, werr, data)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("yamlToJSON gives\n%s\nthe plain decode\n%s\nof %q", got, want, data)
	}
}

// yamlCases are what a YAML document may hold that JSON cannot say the same
// way: each must convert as the plain decode converts it.
var yamlCases = []string{
	petstoreYAML,
	"a: 1\nb: [1, -2, 0, 007, 0x1F, 0o17, 1_000, +3, -0, 123456789012345678, 12345678901234567890]\n",
	"a: [1.5, 1e3, .inf, -.Inf, .nan, 0.0, -0.0, 1e400]\n",
	"a: [true, false, True, FALSE, yes, no, on, off, y, n]\n",
	"a: [~, null, Null, '', \"\"]\nb:\nc: !!null ''\n",
	"d: 2024-01-02\nt: 2001-12-14t21:59:43.10-05:00\ns: '2024-01-02'\n",
	"bin: !!binary aGVsbG8=\nstr: !!str 12\nint: !!int '12'\nf: !!float 3\ncustom: !thing value\n",
	"200: ok\n404: {description: gone}\n1.5: x\ntrue: y\n~: z\n2024-01-02: date\n0x10: hex\n",
	"html: '<a href=\"x\">&amp;</a>'\nctl: \"\\x01\\t\\b\\f\\u2028\\u2029\"\nuni: \"é 日本 \\U0001F600\"\nbad: \"\\xff\"\n",
	"base: &base {a: 1, b: 2}\nuse:\n  <<: *base\n  b: 3\nlist:\n  <<: [*base, {c: 4}]\n",
	"a: &x [1, 2]\nb: *x\nc: {k: *x}\n&k key: v\nd: *k\n",
	"z: 1\na: 2\nm: {y: 1, b: 2, a: {d: 1, c: 2}}\n",
	"a: 1\na: 2\n",
	"200: a\n'200': b\n",
	"0x10: a\n16: b\n",
	"[1, 2]: a\n",
	"*x: a\n",
	"? {a: 1}\n: b\n",
	"- &a x\n- *a: y\n",
	"",
	"# only a comment\n",
	"--- 1\n--- 2\n",
	"just text",
	"a: [\n",
	"a: *nowhere\n",
	"a: &a [*a]\n",
	"a: !!binary '***'\n",
	"a: |\n  line one\n  line two\nb: >\n  folded\n  text\n",
}

func TestYAMLToJSONMatchesPlainDecode(t *testing.T) {
	for i, c := range yamlCases {
		t.Run(fmt.Sprint(i), func(t *testing.T) { sameConversion(t, []byte(c)) })
	}
}

// TestYAMLToJSONMatchesPlainDecodeOnRealDocuments holds every YAML document
// of the OpenAPI examples package to the plain decode, byte for byte.
func TestYAMLToJSONMatchesPlainDecodeOnRealDocuments(t *testing.T) {
	root := requireSpec(t, oasExamples)
	files, _ := filepath.Glob(filepath.Join(root, "[23].[01]", "yaml", "*.yaml"))
	if len(files) < 50 {
		t.Fatalf("only %d YAML documents under %s", len(files), root)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) { sameConversion(t, data) })
	}
}

// TestYAMLAliasBombRefused: the 517 KB document whose aliases expand to
// 757 MB is refused as an invalid document that names the alias expansion,
// having allocated a few times its size, not the expansion.
func TestYAMLAliasBombRefused(t *testing.T) {
	doc := poppytest.YAMLAliasBomb("https://api.example.com")
	if n := len(doc); n < 510_000 || n > 525_000 {
		t.Fatalf("the bomb is %d bytes", n)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load(context.Background(), doc, "", nil)
	runtime.ReadMemStats(&after)
	var e *Error
	if !errors.As(err, &e) || e.Code != "invalid_document" {
		t.Fatalf("Load: %v", err)
	}
	for _, want := range []string{"YAML alias expansion", "alias *big on line", "expand it past 3.0 MiB of text"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Errorf("refusing the bomb allocated %d MiB", n>>20)
	}
}

// TestYAMLExpansionBounds: nodes multiplied by nested aliases (a billion
// laughs), nesting deepened by them, and an alias inside its own anchor are
// refused; a document whose aliases stay within the bound is read.
func TestYAMLExpansionBounds(t *testing.T) {
	var laughs strings.Builder
	laughs.WriteString("l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&laughs, "l%d: &l%d [*l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d, *l%[3]d]\n", i, i, i-1)
	}
	var deep strings.Builder
	deep.WriteString("d0: &d0 " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n")
	deep.WriteString("d1: &d1 " + strings.Repeat("[", 5000) + "*d0" + strings.Repeat("]", 5000) + "\n")
	for _, tc := range []struct{ name, doc, want string }{
		{"billion laughs", laughs.String(), "past 1050"},
		{"deep", deep.String(), "nesting deeper than 10000"},
		{"cycle", "a: &a [1, *a]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := yamlToJSON([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("yamlToJSON: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	within := "s: &s '" + strings.Repeat("y", 100_000) + "'\ncopies: [*s, *s, *s]\n"
	sameConversion(t, []byte(within))
	if _, err := yamlToJSON([]byte(within)); err != nil {
		t.Fatal(err)
	}
}

// FuzzYAMLToJSON: the bounded conversion never panics, and agrees with the
// plain decode on every document within the bound.
func FuzzYAMLToJSON(f *testing.F) {
	for _, c := range yamlCases {
		f.Add([]byte(c))
	}
	f.Add([]byte("l0: &l0 [a, a]\nl1: &l1 [*l0, *l0]\nl2: [*l1, *l1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameConversion(t, data)
	})
}
