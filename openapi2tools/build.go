package openapi2tools

// This file builds one operation's tool: its arguments (parameters and body
// fields, named per docs/tools.md "API arguments"), its input schema (always a
// top-level object with no oneOf/anyOf/allOf), and the routing NewRequest
// uses to put each argument back where it belongs.

import (
	"encoding/json"
	"fmt"
	"mime"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// inputArg is an argument with its schema, while a tool is being built.
type inputArg struct {
	arg
	schema map[string]any
}

var templateVar = regexp.MustCompile(`\{([^{}/]+)\}`)

func (b *builder) operation(path, method string, item *wirePathItem, op *wireOperation) (*Tool, error) {
	server, err := b.server(item, op)
	if err != nil {
		return nil, err
	}
	c := newConverter(b.r, b.patterns)
	args, err := b.parameters(c, path, item.Parameters, op.Parameters)
	if err != nil {
		return nil, err
	}
	body, bodyArgs, err := b.requestBody(c, op.RequestBody)
	if err != nil {
		return nil, err
	}
	args = append(args, bodyArgs...)
	schema, routes, err := inputSchema(args)
	if err != nil {
		return nil, err
	}
	return &Tool{
		Name:        toolNamer{prefix: b.opts.Prefix}.base(method, path, op.OperationID),
		Description: toolDescription(method, path, op, b.opts.MaxDescription),
		InputSchema: schema,
		Annotations: annotations(method, toolTitle(op)),
		Method:      method,
		Path:        path,
		OperationID: op.OperationID,
		Summary:     trimText(op.Summary, propertyDescription),
		Tags:        op.Tags,
		Deprecated:  op.Deprecated,
		server:      server,
		args:        routes,
		body:        body,
	}, nil
}

// ignoredHeaders are header parameters a tool never sets. OpenAPI 3.1
// §4.8.12.1: "If in is "header" and the name field is "Accept",
// "Content-Type" or "Authorization", the parameter definition SHALL be
// ignored." DPoP, Cookie and the framing headers belong to the transport.
var ignoredHeaders = map[string]bool{
	"accept": true, "content-type": true, "authorization": true, "dpop": true,
	"cookie": true, "host": true, "content-length": true, "transfer-encoding": true, "connection": true,
}

// parameters merges path-level and operation-level parameters (the
// operation's override by name and location, OpenAPI 3.1 §4.8.10) and adds
// a string argument for a path template variable no parameter describes.
func (b *builder) parameters(c *converter, path string, pathLevel, opLevel []json.RawMessage) ([]inputArg, error) {
	var out []inputArg
	index := map[string]int{}
	for _, raw := range append(append([]json.RawMessage{}, pathLevel...), opLevel...) {
		p, err := decodeRef(b.r, raw, func(p *wireParam) string { return p.Ref })
		if err != nil {
			return nil, fmt.Errorf("parameter: %v", err)
		}
		a, err := b.parameter(c, p)
		if err != nil {
			return nil, err
		}
		if a == nil {
			continue
		}
		key := a.In + "\x00" + a.Key
		if i, ok := index[key]; ok {
			out[i] = *a
			continue
		}
		index[key] = len(out)
		out = append(out, *a)
	}
	for _, m := range templateVar.FindAllStringSubmatch(path, -1) {
		if _, ok := index[inPath+"\x00"+m[1]]; !ok {
			index[inPath+"\x00"+m[1]] = len(out)
			out = append(out, inputArg{
				arg:    arg{In: inPath, Key: m[1], Required: true, Style: "simple"},
				schema: map[string]any{"type": "string"},
			})
		}
	}
	return out, nil
}

// parameter translates one parameter; nil means it is ignored.
func (b *builder) parameter(c *converter, p *wireParam) (*inputArg, error) {
	switch p.In {
	case inPath, inQuery, inHeader, inCookie:
	default:
		return nil, fmt.Errorf("parameter %q: location %q is not path, query, header or cookie", p.Name, p.In)
	}
	if p.Name == "" {
		return nil, fmt.Errorf("a %s parameter has no name", p.In)
	}
	if p.In == inHeader && ignoredHeaders[strings.ToLower(p.Name)] {
		return nil, nil
	}
	a := &inputArg{arg: arg{In: p.In, Key: p.Name, Required: p.Required || p.In == inPath, Style: p.Style}}
	rawSchema := p.Schema
	if len(rawSchema) == 0 {
		// OpenAPI 3.1 §4.8.12.4: a parameter may give content with one media type instead.
		for _, mt := range sortedKeys(p.Content) {
			rawSchema, a.Style = p.Content[mt].Schema, "json"
			break
		}
	}
	s, err := b.schema(c, rawSchema)
	if err != nil {
		return nil, fmt.Errorf("parameter %q: %v", p.Name, err)
	}
	a.schema = s
	d := strings.TrimSpace(p.Description)
	if d == "" {
		d = plainDescription(s)
	}
	if p.Deprecated {
		d = "Deprecated. " + d
	}
	setDescription(s, d)
	if a.Style == "" {
		a.Style = map[string]string{inPath: "simple", inQuery: "form", inHeader: "simple", inCookie: "form"}[p.In]
	}
	// OpenAPI 3.1 §4.8.12.2.1: explode defaults to true for style form, false otherwise.
	a.Explode = a.Style == "form"
	if p.Explode != nil {
		a.Explode = *p.Explode
	}
	return a, nil
}

// schema decodes and converts a raw schema; none means any value.
func (b *builder) schema(c *converter, raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	var s any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	out, _, err := c.child(s, 0)
	return out, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Media types in order of preference for a request body.
const (
	mediaJSON      = "json"
	mediaForm      = "form"
	mediaMultipart = "multipart"
	mediaText      = "text"
	mediaOther     = "other"
)

func mediaKind(mt string) string {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		t = strings.ToLower(mt)
	}
	switch {
	case t == "application/json" || strings.HasSuffix(t, "+json") || t == "*/*" || t == "application/*":
		return mediaJSON
	case t == "application/x-www-form-urlencoded":
		return mediaForm
	case t == "multipart/form-data":
		return mediaMultipart
	case strings.HasPrefix(t, "text/"):
		return mediaText
	}
	return mediaOther
}

// pickMedia prefers JSON, then form, multipart, text and anything else.
func pickMedia(content map[string]wireMedia) (string, wireMedia) {
	best, bestRank := "", 99
	rank := map[string]int{mediaJSON: 0, mediaForm: 1, mediaMultipart: 2, mediaText: 3, mediaOther: 4}
	for _, mt := range sortedKeys(content) {
		if r := rank[mediaKind(mt)]; r < bestRank {
			best, bestRank = mt, r
		}
	}
	return best, content[best]
}

// requestBody turns the body into arguments: an object's top-level fields
// each as their own argument, anything else as the one argument "body".
func (b *builder) requestBody(c *converter, raw json.RawMessage) (*bodySpec, []inputArg, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	rb, err := decodeRef(b.r, raw, func(r *wireRequestBody) string { return r.Ref })
	if err != nil {
		return nil, nil, fmt.Errorf("request body: %v", err)
	}
	if len(rb.Content) == 0 {
		return nil, nil, nil
	}
	mt, media := pickMedia(rb.Content)
	if mt == "*/*" || mt == "application/*" {
		mt = "application/json"
	}
	s, err := b.schema(c, media.Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("request body: %v", err)
	}
	spec := &bodySpec{MediaType: mt, Required: rb.Required}
	kind := mediaKind(mt)
	if fields, ok := objectFields(s, kind); ok {
		return spec, bodyFieldArgs(s, fields, rb.Required, kind), nil
	}
	if kind == mediaText || kind == mediaOther {
		s = textBodySchema(s)
	}
	whole := inputArg{arg: arg{In: inWhole, Key: "body", Required: rb.Required}, schema: s}
	if alts := alternatives(s); alts != "" {
		setDescription(s, alts)
	} else if d := strings.TrimSpace(rb.Description); d != "" {
		setDescription(s, d)
	}
	return spec, []inputArg{whole}, nil
}

// objectFields reports whether a body schema is a plain object whose fields
// can be arguments: properties, no composition, and an encoding that has
// fields (JSON, form or multipart).
func objectFields(s map[string]any, kind string) (map[string]any, bool) {
	if kind != mediaJSON && kind != mediaForm && kind != mediaMultipart {
		return nil, false
	}
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 {
		return nil, false
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		if _, ok := s[k]; ok {
			return nil, false
		}
	}
	if t, ok := s["type"]; ok && t != "object" {
		return nil, false
	}
	return props, true
}

func bodyFieldArgs(s, props map[string]any, bodyRequired bool, kind string) []inputArg {
	required := map[string]bool{}
	if r, ok := s["required"].([]string); ok && bodyRequired {
		for _, name := range r {
			required[name] = true
		}
	}
	out := make([]inputArg, 0, len(props))
	for _, name := range sortedKeys(props) {
		ps, _ := props[name].(map[string]any)
		a := inputArg{arg: arg{In: inBody, Key: name, Required: required[name]}, schema: ps}
		if kind == mediaMultipart {
			a.Binary = markFile(ps)
			if items, ok := ps["items"].(map[string]any); ok && ps["type"] == "array" {
				a.Binary = markFile(items)
			}
		}
		out = append(out, a)
	}
	return out
}

// markFile turns a binary string schema (OpenAPI 3.1 §4.8.14.3: a file in
// multipart/form-data) into text a model can give, and reports whether it was one.
func markFile(s map[string]any) bool {
	if s["format"] != "binary" {
		return false
	}
	delete(s, "format")
	d, _ := s["description"].(string)
	s["description"] = trimText(strings.TrimSpace(d+" (file contents, sent as a file part)"), propertyDescription)
	return true
}

// textBodySchema is the schema of a body sent as it is: a string.
func textBodySchema(s map[string]any) map[string]any {
	out := map[string]any{"type": "string"}
	if d, ok := s["description"]; ok {
		out["description"] = d
	}
	return out
}

// alternatives describes a oneOf/anyOf body: "One of: ...".
func alternatives(s map[string]any) string {
	for _, kw := range []string{"oneOf", "anyOf"} {
		alts, ok := s[kw].([]any)
		if !ok {
			continue
		}
		var names []string
		for _, a := range alts {
			names = append(names, shapeOf(a))
		}
		return "One of: " + strings.Join(names, "; ")
	}
	return ""
}

// shapeOf names a schema briefly: its description, or its type and fields.
func shapeOf(a any) string {
	m, _ := a.(map[string]any)
	if d, ok := m["description"].(string); ok && d != "" {
		return trimText(d, 40)
	}
	t := fmt.Sprint(m["type"])
	if t == "<nil>" {
		t = "value"
	}
	if props, ok := m["properties"].(map[string]any); ok {
		keys := sortedKeys(props)
		return t + " (" + strings.Join(keys[:min(len(keys), 4)], ", ") + ")"
	}
	return t
}

// inputSchema names the arguments and emits the tool's input schema.
func inputSchema(args []inputArg) (json.RawMessage, []arg, error) {
	routes := make([]arg, len(args))
	for i := range args {
		routes[i] = args[i].arg
	}
	argNamer{}.name(routes)
	props := make(map[string]any, len(args))
	var required []string
	for i, r := range routes {
		delete(args[i].schema, noteMark)
		props[r.Name] = args[i].schema
		if r.Required {
			required = append(required, r.Name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	out, err := json.Marshal(schema)
	if err != nil {
		return nil, nil, fmt.Errorf("input schema: %v", err)
	}
	return out, routes, nil
}

// Text a model reads is kept short: descriptions are collapsed to one line
// and cut at a word boundary within a budget.

// trimText collapses whitespace and cuts s to at most max runes, at a word
// boundary when one is near, ending with "…" when it cut.
func trimText(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	cut, n := 0, 0
	for i := range s {
		if n == max-1 {
			cut = i
			break
		}
		n++
	}
	if sp := strings.LastIndexByte(s[:cut], ' '); sp > cut/2 {
		cut = sp
	}
	return strings.TrimRight(s[:cut], " ,;:.") + "…"
}

// toolDescription is what a model reads about an operation: method and path,
// the summary, then as much of the description as the budget allows.
func toolDescription(method, path string, op *wireOperation, max int) string {
	parts := []string{method + " " + path + "."}
	if op.Deprecated {
		parts = append(parts, "Deprecated.")
	}
	summary := strings.TrimSpace(op.Summary)
	if summary != "" {
		parts = append(parts, strings.TrimRight(summary, ".")+".")
	}
	desc := strings.TrimSpace(op.Description)
	if desc != "" && (summary == "" || !strings.HasPrefix(desc, summary)) {
		parts = append(parts, desc)
	}
	return trimText(strings.Join(parts, " "), max)
}

// toolTitle is the annotation title: the summary, else the operationId.
func toolTitle(op *wireOperation) string {
	if t := strings.TrimSpace(op.Summary); t != "" {
		return trimText(t, 80)
	}
	return trimText(op.OperationID, 80)
}
