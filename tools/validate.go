package tools

// This file checks a tool call's arguments against the input schema the tool
// publishes, with a JSON Schema 2020-12 validator: an unknown argument, a
// wrong type, a missing required argument or a value outside an enum is an
// invalid_arguments result that names the argument, and for an unknown name
// the nearest known one (docs/tools.md "Conventions of every tool"). A
// schema is compiled on the first call that needs it, never while tools are
// listed, so a Company with a thousand operations costs nothing until one is
// called. Relayed MCP tools are not checked here: the Company's MCP server
// checks its own schemas.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxArgumentProblems bounds how many problems one result names.
const maxArgumentProblems = 3

// argSchema is a published input schema, compiled on first use. It is safe
// for concurrent use.
type argSchema struct {
	raw json.RawMessage

	once     sync.Once
	compiled *jsonschema.Schema
	doc      any // raw decoded, to find the known names at a location
	err      error
}

func newArgSchema(raw json.RawMessage) *argSchema { return &argSchema{raw: raw} }

// compile compiles the schema once.
func (s *argSchema) compile() error {
	s.once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.raw))
		if err != nil {
			s.err = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020) // MCP 2025-11-25: inputSchema without $schema is JSON Schema 2020-12
		if err = c.AddResource("input.json", doc); err == nil {
			s.compiled, err = c.Compile("input.json")
		}
		s.doc, s.err = doc, err
	})
	return s.err
}

// check validates args, the arguments as JSON decodes them. A schema that
// does not compile checks nothing: the Company's server still checks what it
// receives, and that schema's tool is no worse than before.
func (s *argSchema) check(args any) error {
	if s.compile() != nil {
		return nil
	}
	err := s.compiled.Validate(args)
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err
	}
	var problems []string
	for _, leaf := range leaves(ve, nil) {
		problems = append(problems, s.describe(leaf))
	}
	slices.Sort(problems)
	problems = slices.Compact(problems)
	if len(problems) > maxArgumentProblems {
		problems = append(problems[:maxArgumentProblems], fmt.Sprintf("and %d more", len(problems)-maxArgumentProblems))
	}
	return &argumentError{strings.Join(problems, "; ")}
}

// leaves are the errors of e that have no causes: the problems themselves.
func leaves(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}

// describe phrases one problem for the model, naming the argument.
func (s *argSchema) describe(e *jsonschema.ValidationError) string {
	at := strings.Join(e.InstanceLocation, ".")
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		var out []string
		for _, p := range k.Properties {
			out = append(out, unknownArgument(argPath(at, p), knownNames(s.doc, e.InstanceLocation)))
		}
		return strings.Join(out, "; ")
	case *kind.Required:
		var out []string
		for _, p := range k.Missing {
			out = append(out, fmt.Sprintf("`%s` is required", argPath(at, p)))
		}
		return strings.Join(out, "; ")
	case *kind.Type:
		return fmt.Sprintf("`%s` must be %s, not %s", at, strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		want, _ := json.Marshal(k.Want)
		got, _ := json.Marshal(k.Got)
		return fmt.Sprintf("`%s` must be one of %s, not %s", at, want, untrustedValue(got))
	}
	// A leaf's Error is "at '/ptr': what is wrong".
	_, what, ok := strings.Cut(e.Error(), "': ")
	if !ok {
		what = e.Error()
	}
	if at == "" {
		return "the arguments: " + what
	}
	return fmt.Sprintf("`%s`: %s", at, what)
}

// untrustedValue is a value the client sent, cut short: it is echoed to the model.
func untrustedValue(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func argPath(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// unknownArgument says name is no argument, and which known one it may mean.
func unknownArgument(name string, known []string) string {
	msg := fmt.Sprintf("`%s` is not an argument", name)
	last := name[strings.LastIndex(name, ".")+1:]
	if near, ok := nearest(last, known); ok {
		return msg + fmt.Sprintf(" (did you mean `%s`?)", near)
	}
	if len(known) > 0 {
		return msg + " (known: " + strings.Join(known, ", ") + ")"
	}
	return msg
}

// knownNames are the property names the schema doc declares at an instance
// location, sorted; none when the location cannot be followed.
func knownNames(doc any, loc []string) []string {
	s, _ := doc.(map[string]any)
	for _, tok := range loc {
		if props, ok := s["properties"].(map[string]any); ok && props[tok] != nil {
			s, _ = props[tok].(map[string]any)
		} else if items, ok := s["items"].(map[string]any); ok {
			s = items
		} else {
			return nil
		}
	}
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// nearest is the known name closest to name in edit distance, when it is
// close enough to be a slip: at most a third of its length, and 1 at least.
func nearest(name string, known []string) (string, bool) {
	best, bestD := "", -1
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD >= 0 && bestD <= max(1, len([]rune(name))/3)
}

// editDistance is the edit distance of a and b in which a letter added,
// dropped, changed, or swapped with its neighbour counts 1 (optimal string
// alignment).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// checkValue checks args as a client gave them, whatever Go values they
// are, without the leniencies of poppy-mcp's own tools.
func (s *argSchema) checkValue(args any) error {
	v, err := decodeArguments(args)
	if err != nil {
		return &argumentError{"they are not JSON"}
	}
	return s.check(v)
}

// decodeArguments is a call's arguments as JSON decodes them (numbers as
// json.Number), whatever Go values a client in the same process passed; no
// arguments are an empty object.
func decodeArguments(args any) (any, error) {
	if args == nil {
		return object{}, nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}
