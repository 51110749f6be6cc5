package openapi2tools

// This file holds the wire structures of an OpenAPI 3.x document: only the
// parts a tool needs. Responses, examples, callbacks and security schemes are
// never decoded (encoding/json skips them without allocating), which is most of
// what makes Load fast on large documents.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// wireTop is the document's top level. Only the component kinds an
// operation's input can reference are kept.
type wireTop struct {
	OpenAPI, Swagger string
	Info, Servers    json.RawMessage
	Paths            map[string]json.RawMessage
	Components       wireComponents
}

type wireComponents struct {
	Schemas, Parameters, RequestBodies, PathItems map[string]json.RawMessage
}

// decodeTop decodes the top level. The containers it keeps (paths and the
// component kinds) alias raw instead of copying it, which halves what a large
// document costs while it is translated. A member of the wrong type fails
// only itself, except paths.
func decodeTop(raw json.RawMessage) (*wireTop, error) {
	if !json.Valid(raw) {
		var v any
		return nil, json.Unmarshal(raw, &v) // the decoder's own message says where
	}
	m, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	var top wireTop
	for key, dst := range map[string]*string{"openapi": &top.OpenAPI, "swagger": &top.Swagger} {
		if v := m[key]; len(v) > 0 {
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, fmt.Errorf("%s: %v", key, err)
			}
		}
	}
	if v := m["paths"]; len(v) > 0 && string(v) != "null" {
		if top.Paths, err = objectMembers(v); err != nil {
			return nil, fmt.Errorf("paths: %v", err)
		}
	}
	top.Info, top.Servers = m["info"], m["servers"]
	comps, _ := objectMembers(m["components"])
	for key, dst := range map[string]*map[string]json.RawMessage{"schemas": &top.Components.Schemas,
		"parameters": &top.Components.Parameters, "requestBodies": &top.Components.RequestBodies, "pathItems": &top.Components.PathItems} {
		*dst, _ = objectMembers(comps[key]) // a malformed kind surfaces as a broken $ref
	}
	return &top, nil
}

// wireInfo is the document's info object.
type wireInfo struct {
	Title   string `json:"title"`
	Version string `json:"version"`
}

// wireServer is a Server Object (OpenAPI 3.1 §4.8.5).
type wireServer struct {
	URL       string                        `json:"url"`
	Variables map[string]wireServerVariable `json:"variables"`
}

type wireServerVariable struct {
	Default string `json:"default"`
}

// wirePathItem keeps each operation raw so that one malformed operation
// costs only itself.
type wirePathItem struct {
	Ref        string            `json:"$ref"`
	Servers    []wireServer      `json:"servers"`
	Parameters []json.RawMessage `json:"parameters"`
	Get        json.RawMessage   `json:"get"`
	Put        json.RawMessage   `json:"put"`
	Post       json.RawMessage   `json:"post"`
	Delete     json.RawMessage   `json:"delete"`
	Options    json.RawMessage   `json:"options"`
	Head       json.RawMessage   `json:"head"`
	Patch      json.RawMessage   `json:"patch"`
	Trace      json.RawMessage   `json:"trace"`
}

// operations returns the item's operations in a fixed method order.
func (p *wirePathItem) operations() []methodOp {
	all := []methodOp{
		{"GET", p.Get}, {"PUT", p.Put}, {"POST", p.Post}, {"DELETE", p.Delete},
		{"OPTIONS", p.Options}, {"HEAD", p.Head}, {"PATCH", p.Patch}, {"TRACE", p.Trace},
	}
	out := all[:0]
	for _, m := range all {
		if len(m.raw) > 0 && !bytes.Equal(m.raw, []byte("null")) {
			out = append(out, m)
		}
	}
	return out
}

type methodOp struct {
	method string
	raw    json.RawMessage
}

type wireOperation struct {
	OperationID string            `json:"operationId"`
	Summary     string            `json:"summary"`
	Description string            `json:"description"`
	Tags        []string          `json:"tags"`
	Deprecated  bool              `json:"deprecated"`
	Parameters  []json.RawMessage `json:"parameters"`
	RequestBody json.RawMessage   `json:"requestBody"`
	Servers     []wireServer      `json:"servers"`
}

// wireParam is a Parameter Object or a Reference Object.
type wireParam struct {
	Ref         string               `json:"$ref"`
	Name        string               `json:"name"`
	In          string               `json:"in"`
	Description string               `json:"description"`
	Required    bool                 `json:"required"`
	Deprecated  bool                 `json:"deprecated"`
	Style       string               `json:"style"`
	Explode     *bool                `json:"explode"`
	Schema      json.RawMessage      `json:"schema"`
	Content     map[string]wireMedia `json:"content"`
}

// wireRequestBody is a Request Body Object or a Reference Object.
type wireRequestBody struct {
	Ref         string               `json:"$ref"`
	Description string               `json:"description"`
	Required    bool                 `json:"required"`
	Content     map[string]wireMedia `json:"content"`
}

type wireMedia struct {
	Schema json.RawMessage `json:"schema"`
}

// serverURL substitutes each variable's default and resolves the result
// against the document's URL. The result may still be relative when base is
// nil.
func serverURL(s wireServer, base *url.URL) (string, error) {
	raw := s.URL
	if raw == "" {
		raw = "/"
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(raw, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(raw[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("server %q: unclosed variable", s.URL)
		}
		v, ok := s.Variables[raw[i+1:i+j]]
		if !ok {
			return "", fmt.Errorf("server %q: variable %q is not defined", s.URL, raw[i+1:i+j])
		}
		b.WriteString(raw[:i])
		b.WriteString(v.Default)
		raw = raw[i+j+1:]
	}
	b.WriteString(raw)
	raw = b.String()
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("server %q: %v", s.URL, err)
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}
