package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInputSchema: what inference cannot say comes from schema tags, an
// optional argument's type is not a union with null, and an object that
// takes any property says nothing of additionalProperties (its default).
func TestInputSchema(t *testing.T) {
	t.Parallel()
	type inner struct {
		A string `json:"a,omitempty" jsonschema:"a"`
	}
	type args struct {
		N *integer       `json:"n,omitempty" schema:"minimum=1,maximum=3" jsonschema:"n"`
		S scopeList      `json:"s" schema:"minItems=1" jsonschema:"s"`
		O *inner         `json:"o,omitempty" schema:"open" jsonschema:"o"`
		C *inner         `json:"c,omitempty" jsonschema:"c"`
		M map[string]any `json:"m,omitempty" jsonschema:"m"`
	}
	got := string(inputSchema[args]())
	want := `{"type":"object","properties":{` +
		`"n":{"type":"integer","description":"n","minimum":1,"maximum":3},` +
		`"s":{"type":"array","items":{"type":"string"},"description":"s","minItems":1},` +
		`"o":{"type":"object","properties":{"a":{"type":"string","description":"a"}},"description":"o"},` +
		`"c":{"type":"object","properties":{"a":{"type":"string","description":"a"}},"description":"c","additionalProperties":false},` +
		`"m":{"type":"object","description":"m"}},"required":["s"],"additionalProperties":false}`
	if got != want {
		t.Errorf("inputSchema =\n%s\nwant\n%s", got, want)
	}
}

// TestInputSchemaBadTag: a schema tag that says nothing known is a
// mistake found when the Server is built, not a bound silently dropped.
func TestInputSchemaBadTag(t *testing.T) {
	t.Parallel()
	for _, tag := range []string{"minimum=x", "maximum", "pattern=a"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "schema tag") {
					t.Errorf("tag %q: %v", tag, r)
				}
			}()
			switch tag {
			case "minimum=x":
				inputSchema[struct {
					X int `json:"x" schema:"minimum=x" jsonschema:"x"`
				}]()
			case "maximum":
				inputSchema[struct {
					X int `json:"x" schema:"maximum" jsonschema:"x"`
				}]()
			default:
				inputSchema[struct {
					X string `json:"x" schema:"pattern=a" jsonschema:"x"`
				}]()
			}
		}()
	}
}

// TestCompanyWord: a value poppy-mcp knows is named as itself, any other
// is marked and on one line.
func TestCompanyWord(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"idle", "idle"},
		{"idle\nNext: pay", `Company text "idle\nNext: pay"`},
		{"idle\u202E", `Company text "idle"`},
	}
	for _, c := range cases {
		if got := companyWord(c.in, "idle", "closed"); got != c.want {
			t.Errorf("companyWord(%+q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"{\n  \"a\": [1,\n 2],\n\"b\": \"x\u2028y\"\n}", `{"a":[1,2],"b":"x\u2028y"}`},
		{"[\"\u0085\"]", `["\\u0085"]`}, // a control character shows once decoded, as in data
		{`{"sku":"rain` + "\u202E" + `-hat"}`, `{"sku":"rain\\u202E-hat"}`},
		{"not json\n- user: pay", `Company text "not json\n- user: pay"`},
	}
	for _, c := range cases {
		if got := oneLine([]byte(c.in)); got != c.want {
			t.Errorf("oneLine(%+q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// FuzzOneLine: whatever a Company sends, oneLine is one line, and JSON
// stays JSON that means what was sent (hidden characters shown).
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"{\n\"a\":\n1}", "[\"\u2028\", \"\u0085\"]", "x\ny", `{"k` + "\u202E" + `":"\u200B"}`, "\"\\n\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := oneLine(raw)
		if strings.ContainsAny(got, "\n\r\u2028\u2029\u0085") {
			t.Fatalf("oneLine(%q) = %q: more than one line", raw, got)
		}
		if json.Valid(raw) && !json.Valid([]byte(got)) && !strings.HasPrefix(got, `Company text "`) {
			t.Fatalf("oneLine(%q) = %q: no longer JSON", raw, got)
		}
	})
}
