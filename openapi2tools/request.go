package openapi2tools

// This file turns a model's arguments into an *http.Request: path templating
// with escaping, query styles, headers, cookies (OpenAPI 3.1 §4.8.12.4 "Style
// Values"), and the body (body.go). The request is built for the Session's
// *http.Client, which adds the DPoP proof and token (Poppy 0.1 §4.3); nothing
// here touches Authorization.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// NewRequest builds the HTTP request for calling the named tool with args.
// Missing required arguments and unknown arguments are ErrInvalidArguments
// errors that name them; a server the document gives no absolute HTTPS URL
// for is ErrNoServer; a URL whose host the document's servers do not name is
// ErrForeignHost.
func (c *Catalog) NewRequest(ctx context.Context, name string, args map[string]any) (*http.Request, error) {
	t, ok := c.Tool(name)
	if !ok {
		return nil, newError("unknown_tool", "no operation %q in %s", name, c.describe())
	}
	if err := t.checkArgs(args); err != nil {
		return nil, err
	}
	u, err := t.url(args)
	if err != nil {
		return nil, err
	}
	if err := c.allowed(u); err != nil {
		return nil, err
	}
	body, contentType, err := t.encodeBody(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, t.Method, u.String(), body)
	if err != nil {
		return nil, newError("invalid_arguments", "%s: %v", name, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	if err := t.setHeaders(req, args); err != nil {
		return nil, err
	}
	return req, nil
}

func (c *Catalog) describe() string {
	if c.Title != "" {
		return strconv.Quote(c.Title)
	}
	return "the document"
}

// checkArgs rejects unknown arguments (listing the valid ones) and missing
// required ones (naming them).
func (t *Tool) checkArgs(args map[string]any) error {
	known := make(map[string]bool, len(t.args))
	var missing, valid []string
	for _, a := range t.args {
		known[a.Name] = true
		valid = append(valid, a.Name)
		if v, ok := args[a.Name]; a.Required && (!ok || v == nil) {
			missing = append(missing, a.Name)
		}
	}
	var unknown []string
	for k := range args {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	sort.Strings(valid)
	switch {
	case len(unknown) > 0 && len(valid) == 0:
		return newError("invalid_arguments", "%s takes no arguments; unknown: %s", t.Name, strings.Join(unknown, ", "))
	case len(unknown) > 0:
		return newError("invalid_arguments", "%s: unknown arguments %s; valid arguments are %s",
			t.Name, strings.Join(unknown, ", "), strings.Join(valid, ", "))
	case len(missing) > 0:
		return newError("invalid_arguments", "%s: missing required arguments %s", t.Name, strings.Join(missing, ", "))
	}
	return nil
}

// url joins the server URL, the expanded path template and the query.
func (t *Tool) url(args map[string]any) (*url.URL, error) {
	base, err := url.Parse(t.server)
	if err != nil || !base.IsAbs() || base.Host == "" {
		return nil, newError("no_server", "%s: server %q is not an absolute URL (the document gives only relative servers and was loaded without its URL)", t.Name, t.server)
	}
	path := t.Path
	var query []string
	for _, a := range t.args {
		v, ok := args[a.Name]
		if !ok || v == nil {
			continue
		}
		switch a.In {
		case inPath:
			s, err := pathValue(a, v)
			if err != nil {
				return nil, newError("invalid_arguments", "%s: %s: %v", t.Name, a.Name, err)
			}
			path = strings.ReplaceAll(path, "{"+a.Key+"}", s)
		case inQuery:
			q, err := queryPairs(a, v)
			if err != nil {
				return nil, newError("invalid_arguments", "%s: %s: %v", t.Name, a.Name, err)
			}
			query = append(query, q...)
		}
	}
	raw := strings.TrimRight(base.String(), "/") + path
	if len(query) > 0 {
		raw += "?" + strings.Join(query, "&")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, newError("invalid_arguments", "%s: URL: %v", t.Name, err)
	}
	return u, nil
}

// allowed refuses a URL that is not HTTPS or whose host no server of the
// document names: the Session's token goes only where the Company said.
func (c *Catalog) allowed(u *url.URL) error {
	// README.md: "Every Poppy URL is HTTPS; there is no insecure mode."
	if u.Scheme != "https" {
		return newError("foreign_host", "refusing %s URL for host %s: only HTTPS is used", u.Scheme, u.Host)
	}
	if u.User != nil || !slices.Contains(c.Hosts, canonicalHost(u)) {
		return newError("foreign_host", "refusing to send to %s: the document's servers do not name it", u.Host)
	}
	return nil
}

// setHeaders sets header and cookie parameters (style simple and form).
func (t *Tool) setHeaders(req *http.Request, args map[string]any) error {
	var cookies []string
	for _, a := range t.args {
		v, ok := args[a.Name]
		if !ok || v == nil || (a.In != inHeader && a.In != inCookie) {
			continue
		}
		s, err := simpleValue(v, a.Explode, ",")
		if err != nil {
			return newError("invalid_arguments", "%s: %s: %v", t.Name, a.Name, err)
		}
		if strings.ContainsAny(s, "\r\n\x00") || (a.In == inCookie && strings.ContainsAny(s, ";")) {
			return newError("invalid_arguments", "%s: %s: value has a forbidden character", t.Name, a.Name)
		}
		if a.In == inHeader {
			req.Header.Set(a.Key, s)
		} else {
			cookies = append(cookies, a.Key+"="+url.QueryEscape(s))
		}
	}
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	return nil
}

// scalar formats a JSON scalar; objects and arrays are JSON-encoded.
func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return fmt.Sprint(x), nil
	case nil:
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// escape percent-encodes every byte outside RFC 3986 §2.3 unreserved
// characters, and a lone "." or "..", so a value never leaves its place.
func escape(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// members formats an array's items, or an object's members sorted by key,
// as strings; ok is false for a scalar.
func members(v any) (keys, vals []string, isObject, ok bool, err error) {
	var raw []any
	switch x := v.(type) {
	case []any:
		raw = x
	case []string:
		return nil, x, false, true, nil
	case map[string]any:
		keys = sortedKeys(x)
		for _, k := range keys {
			raw = append(raw, x[k])
		}
		isObject = true
	default:
		return nil, nil, false, false, nil
	}
	vals = make([]string, len(raw))
	for i, e := range raw {
		if vals[i], err = scalar(e); err != nil {
			return nil, nil, false, false, err
		}
	}
	return keys, vals, isObject, true, nil
}

// simpleValue is style simple (headers) and form (cookies): items joined by
// sep; object members as k,v,k,v or, exploded, k=v,k=v. Nothing is escaped.
func simpleValue(v any, explode bool, sep string) (string, error) {
	keys, vals, isObj, ok, err := members(v)
	if err != nil {
		return "", err
	}
	if !ok {
		return scalar(v)
	}
	parts := make([]string, 0, len(vals)*2)
	for i, s := range vals {
		switch {
		case isObj && explode:
			parts = append(parts, keys[i]+"="+s)
		case isObj:
			parts = append(parts, keys[i], s)
		default:
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, sep), nil
}

// pathValue expands one path parameter: styles simple, label and matrix,
// every value percent-encoded so it stays inside its segment.
func pathValue(a arg, v any) (string, error) {
	keys, vals, isObj, ok, err := members(v)
	if err != nil {
		return "", err
	}
	if !ok || a.Style == "json" {
		s, err := scalar(v)
		return prefixed(a, escape(s)), err
	}
	parts := make([]string, 0, len(vals)*2)
	for i, s := range vals {
		switch {
		case isObj && a.Explode:
			parts = append(parts, escape(keys[i])+"="+escape(s))
		case isObj:
			parts = append(parts, escape(keys[i]), escape(s))
		case a.Style == "matrix" && a.Explode:
			parts = append(parts, escape(a.Key)+"="+escape(s))
		default:
			parts = append(parts, escape(s))
		}
	}
	switch {
	case a.Explode && a.Style == "label":
		return "." + strings.Join(parts, "."), nil
	case a.Explode && a.Style == "matrix":
		return ";" + strings.Join(parts, ";"), nil
	}
	return prefixed(a, strings.Join(parts, ",")), nil
}

func prefixed(a arg, s string) string {
	switch a.Style {
	case "label":
		return "." + s
	case "matrix":
		return ";" + escape(a.Key) + "=" + s
	}
	return s
}

// queryPairs serialises one query parameter as name=value pairs: styles form
// (exploded or not), spaceDelimited, pipeDelimited and deepObject.
func queryPairs(a arg, v any) ([]string, error) {
	k := escape(a.Key)
	keys, vals, isObj, ok, err := members(v)
	if err != nil {
		return nil, err
	}
	if !ok || a.Style == "json" {
		s, err := scalar(v)
		return []string{k + "=" + escape(s)}, err
	}
	var out []string
	for i, s := range vals {
		switch {
		case isObj && a.Style == "deepObject":
			out = append(out, k+"%5B"+escape(keys[i])+"%5D="+escape(s))
		case isObj && a.Explode:
			out = append(out, escape(keys[i])+"="+escape(s))
		case isObj:
			out = append(out, escape(keys[i]), escape(s))
		case a.Explode || a.Style == "deepObject":
			out = append(out, k+"="+escape(s))
		default:
			out = append(out, escape(s))
		}
	}
	if a.Explode || a.Style == "deepObject" {
		return out, nil
	}
	sep := ","
	switch a.Style {
	case "spaceDelimited":
		sep = "%20"
	case "pipeDelimited":
		sep = "|"
	}
	return []string{k + "=" + strings.Join(out, sep)}, nil
}
