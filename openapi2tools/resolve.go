package openapi2tools

// This file implements lazy resolution of local references (RFC 6901 JSON
// Pointers in a URI fragment, as OpenAPI 3.1 §4.8.23 "Reference Object" uses
// them). Only the containers on a reference's way are decoded, each once, so a
// 13 MB document costs a decode of what the operations actually use.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// maxRefHops bounds a chain of references to references.
const maxRefHops = 64

// resolver finds what a "#/..." reference points to. It is used by one
// goroutine (Load) and is not safe for concurrent use.
type resolver struct {
	root json.RawMessage
	// objects and arrays decoded so far, by pointer ("" is the root).
	objects map[string]map[string]json.RawMessage
	arrays  map[string][]json.RawMessage
	// schemas decoded so far, by reference.
	schemas map[string]any
}

func newResolver(root json.RawMessage, top *wireTop) *resolver {
	r := &resolver{
		root:    root,
		objects: map[string]map[string]json.RawMessage{},
		arrays:  map[string][]json.RawMessage{},
		schemas: map[string]any{},
	}
	for ptr, m := range map[string]map[string]json.RawMessage{
		"/paths":                    top.Paths,
		"/components/schemas":       top.Components.Schemas,
		"/components/parameters":    top.Components.Parameters,
		"/components/requestBodies": top.Components.RequestBodies,
		"/components/pathItems":     top.Components.PathItems,
	} {
		if m != nil {
			r.objects[ptr] = m
		}
	}
	return r
}

// errExternalRef marks a reference to another document, which is not loaded.
type errExternalRef struct{ ref string }

func (e errExternalRef) Error() string { return fmt.Sprintf("external $ref %q is not loaded", e.ref) }

// raw returns the JSON a local reference points to.
func (r *resolver) raw(ref string) (json.RawMessage, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, errExternalRef{ref}
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return nil, fmt.Errorf("$ref %q points at the whole document", ref)
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, fmt.Errorf("$ref %q is not a JSON Pointer", ref)
	}
	toks := strings.Split(frag[1:], "/")
	for i, tok := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	// Start from the deepest container already decoded.
	start, ptr := 0, ""
	for k := len(toks) - 1; k > 0; k-- {
		p := "/" + strings.Join(toks[:k], "/")
		if _, ok := r.objects[p]; ok {
			start, ptr = k, p
			break
		}
		if _, ok := r.arrays[p]; ok {
			start, ptr = k, p
			break
		}
	}
	node := r.root
	for _, tok := range toks[start:] {
		child, err := r.child(node, ptr, tok)
		if err != nil {
			return nil, fmt.Errorf("broken $ref %q: %v", ref, err)
		}
		node, ptr = child, ptr+"/"+tok
	}
	return node, nil
}

// child steps from the node at ptr into its member or element tok.
func (r *resolver) child(node json.RawMessage, ptr, tok string) (json.RawMessage, error) {
	if obj, ok := r.objects[ptr]; ok {
		return member(obj, tok)
	}
	if arr, ok := r.arrays[ptr]; ok {
		return element(arr, tok)
	}
	switch first := bytes.TrimLeft(node, " \t\r\n"); {
	case len(first) > 0 && first[0] == '{':
		obj, err := objectMembers(node)
		if err != nil {
			return nil, err
		}
		r.objects[ptr] = obj
		return member(obj, tok)
	case len(first) > 0 && first[0] == '[':
		arr, err := arrayElements(node)
		if err != nil {
			return nil, err
		}
		r.arrays[ptr] = arr
		return element(arr, tok)
	}
	return nil, fmt.Errorf("%q is not an object or array", ptr)
}

func member(obj map[string]json.RawMessage, tok string) (json.RawMessage, error) {
	v, ok := obj[tok]
	if !ok {
		return nil, fmt.Errorf("no member %q", tok)
	}
	return v, nil
}

func element(arr []json.RawMessage, tok string) (json.RawMessage, error) {
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i >= len(arr) {
		return nil, fmt.Errorf("no element %q", tok)
	}
	return arr[i], nil
}

// schema returns the decoded schema a reference points to, decoding it once.
func (r *resolver) schema(ref string) (any, error) {
	if s, ok := r.schemas[ref]; ok {
		return s, nil
	}
	raw, err := r.raw(ref)
	if err != nil {
		return nil, err
	}
	var s any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("$ref %q: %v", ref, err)
	}
	r.schemas[ref] = s
	return s, nil
}

// decodeRef decodes into v the object raw is, following a chain of Reference
// Objects ({"$ref": ...}) to the real one. refOf reads the $ref of a decoded v.
func decodeRef[T any](r *resolver, raw json.RawMessage, refOf func(*T) string) (*T, error) {
	for range maxRefHops {
		v := new(T)
		if err := json.Unmarshal(raw, v); err != nil {
			return nil, err
		}
		ref := refOf(v)
		if ref == "" {
			return v, nil
		}
		next, err := r.raw(ref)
		if err != nil {
			return nil, err
		}
		raw = next
	}
	return nil, fmt.Errorf("more than %d $ref hops", maxRefHops)
}

// Containers alias the document: objectMembers and arrayElements return
// slices of their input, never copies, and are only given valid JSON (the
// document passed json.Valid in decodeTop).

// objectMembers splits a JSON object into its members. Of a repeated key, the
// last wins, as with encoding/json. An empty input is an empty object.
func objectMembers(obj []byte) (map[string]json.RawMessage, error) {
	i := skipSpace(obj, 0)
	if i == len(obj) {
		return nil, nil
	}
	if obj[i] != '{' {
		return nil, fmt.Errorf("not an object")
	}
	m := map[string]json.RawMessage{}
	for i = skipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		end := skipValue(obj, i)
		var key string
		if err := json.Unmarshal(obj[i:end], &key); err != nil {
			return nil, err
		}
		start := skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		end = skipValue(obj, start)
		m[key] = obj[start:end:end]
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return m, nil
}

// arrayElements splits a JSON array into its elements.
func arrayElements(arr []byte) ([]json.RawMessage, error) {
	i := skipSpace(arr, 0)
	if i == len(arr) || arr[i] != '[' {
		return nil, fmt.Errorf("not an array")
	}
	var out []json.RawMessage
	for i = skipSpace(arr, i+1); i < len(arr) && arr[i] != ']'; {
		end := skipValue(arr, i)
		out = append(out, arr[i:end:end])
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return out, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value that starts at i.
func skipValue(b []byte, i int) int {
	switch depth := 0; b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

// skipString returns the end of the string whose opening quote is at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
