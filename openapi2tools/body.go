package openapi2tools

// This file encodes request bodies: JSON (an object built from the body-field
// arguments, or the whole "body" argument), application/x-www-form-urlencoded,
// multipart/form-data (OpenAPI 3.1 §4.8.14.4 "Encoding Object"), and raw text
// for other media types. Bodies are in memory, so the request gets a GetBody
// and the Session's client can send it again after a DPoP nonce challenge.

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/url"
	"strings"
)

// encodeBody returns the body and its Content-Type, or nil when the call has
// no body.
func (t *Tool) encodeBody(args map[string]any) (io.Reader, string, error) {
	if t.body == nil {
		return nil, "", nil
	}
	fields, whole, hasWhole := t.bodyArgs(args)
	if !hasWhole && len(fields) == 0 && !t.body.Required {
		return nil, "", nil
	}
	ct, kind := t.body.MediaType, mediaKind(t.body.MediaType)
	if m, ok := whole.(map[string]any); ok && hasWhole && (kind == mediaForm || kind == mediaMultipart) {
		for _, k := range sortedKeys(m) { // a form described by no object schema
			fields = append(fields, bodyField{arg{Key: k}, m[k]})
		}
		hasWhole = false
	}
	var (
		data []byte
		err  error
	)
	switch {
	case hasWhole && kind != mediaJSON: // sent as it is
		var s string
		if s, err = scalar(whole); err == nil {
			data = []byte(s)
		}
	case hasWhole:
		data, err = json.Marshal(whole)
	case kind == mediaForm:
		data, err = formBody(fields)
	case kind == mediaMultipart:
		data, ct, err = multipartBody(fields)
	default:
		data, err = json.Marshal(orderedFields(fields))
	}
	if err != nil {
		return nil, "", newError("invalid_arguments", "%s: body: %v", t.Name, err)
	}
	return bytes.NewReader(data), ct, nil
}

// bodyField is one body-field argument with its value.
type bodyField struct {
	arg
	value any
}

func (t *Tool) bodyArgs(args map[string]any) (fields []bodyField, whole any, hasWhole bool) {
	for _, a := range t.args {
		v, ok := args[a.Name]
		if !ok {
			continue
		}
		switch a.In {
		case inBody:
			fields = append(fields, bodyField{a, v})
		case inWhole:
			whole, hasWhole = v, true
		}
	}
	return fields, whole, hasWhole
}

// orderedFields maps wire names to values (encoding/json sorts the keys).
func orderedFields(fields []bodyField) map[string]any {
	m := make(map[string]any, len(fields))
	for _, f := range fields {
		m[f.Key] = f.value
	}
	return m
}

// formBody encodes fields as application/x-www-form-urlencoded: arrays as
// repeated fields (style form, explode true, the default), objects as JSON.
func formBody(fields []bodyField) ([]byte, error) {
	var parts []string
	for _, f := range fields {
		vals, err := formValues(f.value)
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			parts = append(parts, url.QueryEscape(f.Key)+"="+url.QueryEscape(v))
		}
	}
	return []byte(strings.Join(parts, "&")), nil
}

func formValues(v any) ([]string, error) {
	_, vals, isObj, ok, err := members(v)
	if err != nil {
		return nil, err
	}
	if ok && !isObj {
		return vals, nil
	}
	s, err := scalar(v)
	return []string{s}, err
}

// multipartBody writes one part per field (a file part for a binary field),
// arrays as repeated parts.
func multipartBody(fields []bodyField) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, f := range fields {
		vals, err := formValues(f.value)
		if err != nil {
			return nil, "", err
		}
		for _, v := range vals {
			var pw io.Writer
			if f.Binary {
				pw, err = w.CreateFormFile(f.Key, f.Key)
			} else {
				pw, err = w.CreateFormField(f.Key)
			}
			if err == nil {
				_, err = io.WriteString(pw, v)
			}
			if err != nil {
				return nil, "", err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}
