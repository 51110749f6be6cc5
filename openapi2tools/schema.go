package openapi2tools

// This file turns an OpenAPI schema (3.0's dialect or 3.1's JSON Schema 2020-12)
// into a plain JSON Schema 2020-12 that MCP clients accept: local $refs
// inlined with a cycle guard, allOf of objects merged, 3.0's nullable and
// boolean exclusiveMinimum rewritten, keywords a client may reject dropped,
// patterns made ECMA-262 (pattern.go) or dropped with a note, long enums
// summarised, descriptions trimmed. Depth and size are bounded, so a
// recursive, 10,000-deep or exponentially shared schema ends in a cut
// ({"type": ...} with a note), never in a stack overflow or runaway memory.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	maxSchemaDepth   = 10   // nesting levels below an argument
	schemaBudget     = 4000 // schema nodes per tool
	maxEnum          = 50   // longer enums are dropped with a note
	maxAlternatives  = 20   // oneOf/anyOf branches kept
	maxPattern       = 256  // longer patterns are dropped
	maxQuotedPattern = 60   // a dropped pattern is quoted in the description up to this length
	readOnlyMark     = "\x00readOnly"
	// noteMark keeps, on an argument's own schema, the note its description
	// ends with, so that the parameter's description can replace the rest.
	noteMark = "\x00note"
)

var jsonTypes = []string{"string", "number", "integer", "boolean", "array", "object", "null"}

// Formats kept: those of JSON Schema 2020-12 §7.3 that clients know, and
// OpenAPI's numeric ones (OpenAPI 3.1 §4.2 "Data Types").
var safeFormats = map[string]bool{
	"date-time": true, "date": true, "time": true, "duration": true,
	"email": true, "hostname": true, "ipv4": true, "ipv6": true,
	"uri": true, "uri-reference": true, "uuid": true,
	"int32": true, "int64": true, "float": true, "double": true,
	"byte": true, "binary": true, // base64 text; file contents (multipart parts)
}

// converter holds one tool's translation state. Not safe for concurrent use.
type converter struct {
	r        *resolver
	patterns map[string]string // ecmaPattern's answers, shared by a document's tools ("" for a drop)
	budget   int               // nodes left before everything is cut
	stack    []string          // references being expanded, for the cycle guard
}

func newConverter(r *resolver, patterns map[string]string) *converter {
	return &converter{r: r, patterns: patterns, budget: schemaBudget}
}

// child converts a schema and tells whether it was marked readOnly, which a
// request leaves out (OpenAPI 3.0 §4.7.24.1: "SHOULD NOT be sent as part of
// the request").
func (c *converter) child(node any, depth int) (map[string]any, bool, error) {
	out, err := c.convert(node, depth)
	if err != nil {
		return nil, false, err
	}
	ro := out[readOnlyMark] == true
	delete(out, readOnlyMark)
	if depth > 0 {
		delete(out, noteMark) // only an argument's own description is rewritten later
	}
	return out, ro, nil
}

func (c *converter) convert(node any, depth int) (map[string]any, error) {
	n, ok := node.(map[string]any)
	if !ok {
		if b, isBool := node.(bool); isBool && !b {
			return map[string]any{"not": map[string]any{}}, nil
		}
		return map[string]any{}, nil
	}
	c.budget--
	if c.budget < 0 || depth > maxSchemaDepth {
		return cut(n, "nested schema omitted"), nil
	}
	if ref, ok := n["$ref"].(string); ok {
		return c.ref(n, ref, depth)
	}
	return c.object(n, depth)
}

func (c *converter) ref(n map[string]any, ref string, depth int) (map[string]any, error) {
	if !strings.HasPrefix(ref, "#") {
		return map[string]any{"description": trimText("external schema "+ref+" not loaded", propertyDescription)}, nil
	}
	target, err := c.r.schema(ref)
	if err != nil {
		return nil, err
	}
	if slices.Contains(c.stack, ref) || len(c.stack) >= maxRefHops {
		t, _ := target.(map[string]any)
		return cut(t, "recursive: "+refName(ref)), nil
	}
	c.stack = append(c.stack, ref)
	out, err := c.convert(target, depth)
	c.stack = c.stack[:len(c.stack)-1]
	if err != nil {
		return nil, err
	}
	// OpenAPI 3.1 §4.8.23: a Reference Object's description overrides the target's.
	if d, ok := n["description"].(string); ok && d != "" {
		setDescription(out, d)
	}
	return out, nil
}

// cut stands in for a schema past the depth or size bound, or a recursion.
func cut(n map[string]any, why string) map[string]any {
	out := map[string]any{}
	if t, ok := n["type"].(string); ok && slices.Contains(jsonTypes, t) {
		out["type"] = t
	} else if _, ok := n["properties"]; ok {
		out["type"] = "object"
	}
	d, _ := n["description"].(string)
	out["description"] = trimText(strings.TrimSpace(d+" ("+why+")"), propertyDescription)
	return out
}

func refName(ref string) string {
	return ref[strings.LastIndexByte(ref, '/')+1:]
}

func (c *converter) object(n map[string]any, depth int) (map[string]any, error) {
	out := map[string]any{}
	if err := c.composition(n, out, depth); err != nil {
		return nil, err
	}
	if t := schemaType(n); t != nil {
		out["type"] = t
	}
	if err := c.properties(n, out, depth); err != nil {
		return nil, err
	}
	if err := c.itemsAndExtras(n, out, depth); err != nil {
		return nil, err
	}
	keepKeywords(n, out)
	note := c.pattern(n, out)
	describe(n, out, note)
	if _, ok := out["type"]; !ok {
		if _, ok := out["properties"]; ok {
			out["type"] = "object"
		} else if _, ok := out["items"]; ok {
			out["type"] = "array"
		}
	}
	if n["readOnly"] == true {
		out[readOnlyMark] = true
	}
	return out, nil
}

// composition handles allOf (merged when its parts are compatible objects),
// oneOf and anyOf (kept, converted).
func (c *converter) composition(n, out map[string]any, depth int) error {
	if all, ok := n["allOf"].([]any); ok && len(all) > 0 {
		parts := make([]map[string]any, 0, len(all))
		for _, p := range all {
			s, _, err := c.child(p, depth+1)
			if err != nil {
				return err
			}
			parts = append(parts, s)
		}
		if merged, ok := mergeAll(parts); ok {
			for k, v := range merged {
				out[k] = v
			}
		} else {
			out["allOf"] = toAny(parts)
		}
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		alts, ok := n[kw].([]any)
		if !ok || len(alts) == 0 {
			continue
		}
		conv := make([]any, 0, min(len(alts), maxAlternatives))
		for _, a := range alts[:min(len(alts), maxAlternatives)] {
			s, _, err := c.child(a, depth+1)
			if err != nil {
				return err
			}
			conv = append(conv, s)
		}
		out[kw] = conv
	}
	return nil
}

// mergeAll merges allOf parts into one schema when no two of them disagree on
// a keyword other than properties and required (which are unions).
func mergeAll(parts []map[string]any) (map[string]any, bool) {
	out := map[string]any{}
	props := map[string]any{}
	var required []string
	for _, p := range parts {
		for k, v := range p {
			switch k {
			case "properties":
				for name, s := range v.(map[string]any) {
					props[name] = s
				}
			case "required":
				required = append(required, v.([]string)...)
			case "description":
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			case "additionalProperties":
				// a part's closed object would reject its siblings' fields
			default:
				if old, ok := out[k]; ok && fmt.Sprint(old) != fmt.Sprint(v) {
					return nil, false
				}
				out[k] = v
			}
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out, true
}

func toAny(parts []map[string]any) []any {
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

// schemaType returns the emitted "type": valid type names only, with 3.0's
// nullable folded in (OpenAPI 3.0 §4.7.24.1 "nullable").
func schemaType(n map[string]any) any {
	var types []string
	switch t := n["type"].(type) {
	case string:
		types = append(types, t)
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	}
	types = slices.DeleteFunc(types, func(s string) bool { return !slices.Contains(jsonTypes, s) })
	if len(types) == 0 {
		return nil
	}
	if n["nullable"] == true {
		types = append(types, "null")
	}
	slices.Sort(types)
	types = slices.Compact(types)
	if len(types) == 1 {
		return types[0]
	}
	return toAnyStrings(types)
}

func toAnyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// properties converts properties (in sorted order, so a cut falls in the same
// place on every run) and keeps required names that still exist.
func (c *converter) properties(n, out map[string]any, depth int) error {
	props, _ := out["properties"].(map[string]any) // from a merged allOf
	if raw, ok := n["properties"].(map[string]any); ok {
		if props == nil {
			props = make(map[string]any, len(raw))
		}
		names := make([]string, 0, len(raw))
		for name := range raw {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			s, ro, err := c.child(raw[name], depth+1)
			if err != nil {
				return err
			}
			if ro {
				delete(props, name)
				continue
			}
			props[name] = s
		}
	}
	if props == nil {
		delete(out, "required")
		return nil
	}
	out["properties"] = props
	required, _ := out["required"].([]string)
	if req, ok := n["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	required = slices.DeleteFunc(slices.Clone(required), func(s string) bool { _, ok := props[s]; return !ok })
	slices.Sort(required)
	if required = slices.Compact(required); len(required) > 0 {
		out["required"] = required
	} else {
		delete(out, "required")
	}
	return nil
}

func (c *converter) itemsAndExtras(n, out map[string]any, depth int) error {
	if items, ok := n["items"].(map[string]any); ok {
		s, _, err := c.child(items, depth+1)
		if err != nil {
			return err
		}
		out["items"] = s
	}
	switch ap := n["additionalProperties"].(type) {
	case bool:
		out["additionalProperties"] = ap
	case map[string]any:
		s, _, err := c.child(ap, depth+1)
		if err != nil {
			return err
		}
		out["additionalProperties"] = s
	}
	return nil
}

// keepKeywords copies the validation keywords clients accept, when their
// values are valid JSON Schema 2020-12 (the meta-schema rejects e.g. a
// negative maxLength, which would make a whole tool list fail).
func keepKeywords(n, out map[string]any) {
	for _, k := range []string{"minimum", "maximum", "multipleOf"} {
		if f, ok := n[k].(float64); ok && (k != "multipleOf" || f > 0) {
			out[k] = f
		}
	}
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		switch v := n[k].(type) {
		case float64:
			out[k] = v
		case bool: // OpenAPI 3.0: a flag on minimum/maximum
			bound := "minimum"
			if k == "exclusiveMaximum" {
				bound = "maximum"
			}
			if f, ok := n[bound].(float64); ok && v {
				out[k] = f
				delete(out, bound)
			}
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"} {
		if f, ok := n[k].(float64); ok && f >= 0 && f == float64(int64(f)) {
			out[k] = int64(f)
		}
	}
	if u, ok := n["uniqueItems"].(bool); ok {
		out["uniqueItems"] = u
	}
	if f, ok := n["format"].(string); ok && safeFormats[f] {
		out["format"] = f
	}
	if v, ok := n["const"]; ok && isScalar(v) {
		out["const"] = v
	}
	if v, ok := n["default"]; ok && isScalar(v) && v != nil {
		out["default"] = v
	}
	if e, ok := n["enum"].([]any); ok && len(e) > 0 && len(e) <= maxEnum {
		out["enum"] = e
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case nil, string, float64, bool:
		return true
	}
	return false
}

// describe sets the description: the schema's own (or its title), with a
// note for a dropped enum or pattern or a deprecation, within the property
// budget.
func describe(n, out map[string]any, note string) {
	d, _ := n["description"].(string)
	if d == "" {
		d, _ = n["title"].(string)
	}
	if n["deprecated"] == true {
		d = "Deprecated. " + d
	}
	if e, ok := n["enum"].([]any); ok && len(e) > maxEnum {
		d = strings.TrimSpace(d + " " + enumNote(e))
	}
	if note != "" {
		out[noteMark] = note
	}
	setDescription(out, d)
}

// setDescription sets s's description to d followed by the note s carries,
// which is never cut.
func setDescription(s map[string]any, d string) {
	note, _ := s[noteMark].(string)
	d = strings.TrimSpace(d)
	switch room := propertyDescription - utf8.RuneCountInString(note) - 1; {
	case note == "":
		d = trimText(d, propertyDescription)
	case d == "" || room < 20:
		d = note
	default:
		d = trimText(d, room) + " " + note
	}
	if d == "" {
		delete(s, "description")
		return
	}
	s["description"] = d
}

// plainDescription is s's description without the note setDescription added.
func plainDescription(s map[string]any) string {
	d, _ := s["description"].(string)
	note, _ := s[noteMark].(string)
	if note == "" {
		return d
	}
	return strings.TrimSuffix(strings.TrimSuffix(d, note), " ")
}

func enumNote(e []any) string {
	var ex []string
	for _, v := range e[:3] {
		ex = append(ex, fmt.Sprint(v))
	}
	return fmt.Sprintf("(one of %d values, e.g. %s)", len(e), strings.Join(ex, ", "))
}

// pattern keeps n's pattern as ECMA-262 in Unicode mode, or drops it and
// returns the note that says so. JSON Schema 2020-12 Validation §6.3.3: a
// pattern "SHOULD be a valid regular expression, according to the ECMA-262
// regular expression dialect"; clients compile it as one, and a pattern a
// client cannot compile makes it refuse the tool.
func (c *converter) pattern(n, out map[string]any) string {
	p, ok := n["pattern"].(string)
	if !ok {
		return ""
	}
	if len(p) > maxPattern {
		return fmt.Sprintf("(a pattern of over %d characters was left out)", maxPattern)
	}
	ecma, seen := c.patterns[p]
	if !seen {
		ecma, _ = ecmaPattern(p) // "" when dropped; an empty pattern matches anything anyway
		c.patterns[p] = ecma
	}
	if ecma != "" || p == "" {
		out["pattern"] = ecma
		return ""
	}
	if utf8.RuneCountInString(p) <= maxQuotedPattern && strings.IndexFunc(p, unicode.IsControl) < 0 {
		return "(pattern in another regex dialect, not checked: " + p + ")"
	}
	return "(a pattern in another regex dialect was left out)"
}
