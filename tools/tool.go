package tools

// This file makes a tool of an arguments struct and a handler that reads
// it: the input schema a client sees is derived from the struct
// (jsonschema-go), and the handler gets the arguments decoded into it, so
// the two cannot drift apart. Bad arguments get an isError result that says
// which, before the handler runs.
//
// A field's `json` tag names the argument (omitempty: optional, otherwise
// required) and its `jsonschema` tag is the description. What inference
// cannot say comes from a `schema` tag: bounds ("minimum=0,maximum=50",
// "minItems=1") and "open" for an object that takes properties beyond its
// fields. An optional argument's schema does not add "null" to its type: a
// client leaves it out instead (the handler still takes a null).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// tool is a definition with its handler.
type tool struct {
	tool    mcp.Tool
	handler server.ToolHandlerFunc
}

// annotations are a tool's MCP annotations, every hint set explicitly.
type annotations struct {
	title                                        string
	readOnly, destructive, idempotent, openWorld bool
}

// result is structured content with a brief text for the model to read
// first, then the structured content serialized as JSON in a second text
// block, so a client that passes the model only text content still gives it
// every link, code and ID (docs/tools.md "Conventions of every tool"). MCP 2025-11-25
// server/tools "Structured Content": "For backwards compatibility, a tool
// that returns structured content SHOULD also return the serialized JSON in
// a TextContent block."
func result(structured any, format string, args ...any) *mcp.CallToolResult {
	r := mcp.NewToolResultStructured(structured, fmt.Sprintf(format, args...))
	if raw, err := marshalText(structured); err == nil {
		r.Content = append(r.Content, mcp.NewTextContent(raw))
	}
	return r
}

// marshalText is v as compact JSON for a text block: <, > and & stay as they
// are, since a model reads it, not an HTML page.
func marshalText(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// failure is a Company or input error the model should read and act on: an
// isError result that says what to do next.
func failure(structured any, format string, args ...any) *mcp.CallToolResult {
	r := result(structured, format, args...)
	r.IsError = true
	return r
}

// companyWord is a value a Company chose (a status, an error code, a
// scope list) as poppy-mcp's own sentences name it: one of known as
// itself, since it is then poppy-mcp's word too, any other cleaned, on one
// line and marked as Company text (docs/tools.md "Company text").
func companyWord(s string, known ...string) string {
	if slices.Contains(known, s) {
		return s
	}
	return untrusted.Quote(s, 300)
}

// oneLine is JSON a Company sent (or that holds its words), for a line of
// text: hidden characters shown as escapes (as in body and data), and
// compacted, with line separators and control characters in its strings
// escaped, so that no line of it can pass as a line of poppy-mcp's.
// Anything not JSON is quoted and marked.
func oneLine(raw []byte) string {
	var b bytes.Buffer
	shown := untrusted.EscapeValues(raw)
	if json.Compact(&b, shown) != nil {
		return untrusted.Quote(string(shown), 0)
	}
	var out strings.Builder
	for _, r := range b.String() {
		if r == '\u2028' || r == '\u2029' || unicode.IsControl(r) {
			fmt.Fprintf(&out, `\u%04X`, r) // only inside a string: compacted JSON has no other
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}

// handler is a tool handler that reads its arguments as an A. A Company's
// refusal or bad input is an isError result it returns, never a Go error.
type handler[A any] func(ctx context.Context, req mcp.CallToolRequest, args A) *mcp.CallToolResult

// newTool makes the tool name with the schema of A, every annotation set
// explicitly, and h as its handler.
func newTool[A any](name, description string, a annotations, h handler[A]) tool {
	t := mcp.NewToolWithRawSchema(name, description, inputSchema[A]())
	t.Annotations = mcp.ToolAnnotation{
		Title:           a.title,
		ReadOnlyHint:    mcp.ToBoolPtr(a.readOnly),
		DestructiveHint: mcp.ToBoolPtr(a.destructive),
		IdempotentHint:  mcp.ToBoolPtr(a.idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(a.openWorld),
	}
	return tool{tool: t, handler: bind(name, newArgSchema(t.RawInputSchema), h)}
}

// bind checks a call's arguments against schema, the tool's published input
// schema, decodes them into an A and runs h with them.
func bind[A any](name string, schema *argSchema, h handler[A]) server.ToolHandlerFunc {
	spaced := scopeArguments(reflect.TypeFor[A]())
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := checkArguments(schema, req.Params.Arguments, spaced); err != nil {
			return invalidArguments(name, err), nil
		}
		var args A
		if err := req.BindArguments(&args); err != nil {
			return invalidArguments(name, err), nil
		}
		return h(ctx, req, args), nil
	}
}

// checkArguments checks args against schema as the decoder of this file
// reads them (docs/tools.md "Conventions of every tool"): a null stands for
// an optional argument left out, and an argument of spaced (a scopeList)
// may be one string of scopes separated by spaces.
func checkArguments(schema *argSchema, args any, spaced []string) error {
	v, err := decodeArguments(args)
	if err != nil {
		return err
	}
	if obj, ok := v.(map[string]any); ok {
		dropNulls(obj)
		for _, name := range spaced {
			if one, ok := obj[name].(string); ok {
				many := []any{}
				for _, sc := range strings.Fields(one) {
					many = append(many, sc)
				}
				obj[name] = many
			}
		}
	}
	return schema.check(v)
}

// object is a JSON object as decoded: tool arguments, _meta.
type object = map[string]any

// dropNulls removes the null members of obj and of the objects within it.
func dropNulls(obj map[string]any) {
	for k, v := range obj {
		switch v := v.(type) {
		case nil:
			delete(obj, k)
		case object:
			dropNulls(v)
		}
	}
}

// scopeArguments are the names of t's arguments that are a scopeList.
func scopeArguments(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); ft == reflect.TypeFor[scopeList]() && name != "" {
			out = append(out, name)
		}
	}
	return out
}

// invalidArguments says which argument does not fit the tool's schema.
func invalidArguments(name string, err error) *mcp.CallToolResult {
	why := "they are not a JSON object"
	var te *json.UnmarshalTypeError
	var ae *argumentError
	switch {
	case errors.As(err, &ae):
		why = ae.Error()
	case errors.As(err, &te) && te.Field != "":
		why = fmt.Sprintf("%s must be %s, not %s", te.Field, jsonType(te.Type), te.Value)
	}
	return failure(map[string]string{"error": "invalid_arguments", "detail": why, "next": "Call " + name + " again with arguments as its input schema gives them."},
		"The arguments of %s do not fit its input schema: %s. Call it again with arguments as the schema gives them.", name, why)
}

// argumentError is an argument a decoder of this file refused.
type argumentError struct{ msg string }

func (e *argumentError) Error() string { return e.msg }

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of another type"
}

// inputSchema is the JSON schema of the arguments struct A. It panics when
// A cannot have one, a mistake every test that builds a Server finds.
func inputSchema[A any]() json.RawMessage {
	s, err := jsonschema.For[A](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[integer]():         {Type: "integer"},
		reflect.TypeFor[scopeList]():       {Type: "array", Items: &jsonschema.Schema{Type: "string"}},
		reflect.TypeFor[json.RawMessage](): {Type: "object"},
	}})
	if err == nil {
		err = tidy(reflect.TypeFor[A](), s)
	}
	if err != nil {
		panic(fmt.Sprintf("tools: the input schema of %s: %v", reflect.TypeFor[A](), err))
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools: the input schema of %s: %v", reflect.TypeFor[A](), err))
	}
	return raw
}

// tidy applies the schema tags of struct t's fields to the properties of
// its schema s, drops "null" from optional properties' types and an
// additionalProperties that allows anything (the default), and does the
// same in nested structs.
func tidy(t reflect.Type, s *jsonschema.Schema) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := s.Properties[name]
		if p == nil || f.Anonymous {
			continue
		}
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
		if p.AdditionalProperties != nil && reflect.ValueOf(*p.AdditionalProperties).IsZero() {
			p.AdditionalProperties = nil // true: any property
		}
		if err := applyTag(p, f.Tag.Get("schema")); err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if err := tidy(f.Type, p); err != nil {
			return err
		}
	}
	return nil
}

// applyTag sets what a schema tag says on p.
func applyTag(p *jsonschema.Schema, tag string) error {
	for item := range strings.SplitSeq(tag, ",") {
		key, value, _ := strings.Cut(item, "=")
		n, err := strconv.Atoi(value)
		switch {
		case key == "":
		case key == "open":
			p.AdditionalProperties = nil
		case err != nil:
			return fmt.Errorf("schema tag %q: %v", item, err)
		case key == "minimum":
			p.Minimum = jsonschema.Ptr(float64(n))
		case key == "maximum":
			p.Maximum = jsonschema.Ptr(float64(n))
		case key == "minItems":
			p.MinItems = jsonschema.Ptr(n)
		default:
			return fmt.Errorf("schema tag %q: unknown", item)
		}
	}
	return nil
}

// integer is an argument the schema calls an integer. It takes any JSON
// number, so a client that sends 5.0 is not refused; nil pointer: not given.
type integer float64

// duration is the argument as seconds, def when it was not given, within 0
// and most.
func (n *integer) duration(def, most time.Duration) time.Duration {
	if n == nil {
		return def
	}
	return min(max(time.Duration(float64(*n)*float64(time.Second)), 0), most)
}

// scopeList is a scopes argument: an array of scope strings, or one string
// of scopes separated by spaces, as OAuth writes them.
type scopeList []string

func (l *scopeList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = strings.Fields(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &argumentError{"scopes must be an array of scope strings"}
	}
	*l = nil
	for _, sc := range many {
		*l = append(*l, strings.Fields(sc)...)
	}
	return nil
}

// sorted is the scopes sorted, each once.
func (l scopeList) sorted() []string {
	out := slices.Clone([]string(l))
	slices.Sort(out)
	return slices.Compact(out)
}

// companyArgs name a Company by one of its domains: the arguments of a tool
// that needs nothing else, and the first of many others'.
type companyArgs struct {
	Domain string `json:"domain" jsonschema:"The Company's domain, e.g. example.com"`
}
