package tools

import (
	"strings"
	"testing"
)

// TestInputSchema: what inference cannot say comes from schema tags, an
// optional argument's type is not a union with null, and an object that
// takes any property says nothing of additionalProperties (its default).
func TestInputSchema(t *testing.T) {
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
