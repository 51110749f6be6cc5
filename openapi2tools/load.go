package openapi2tools

// This file implements Load: bytes (JSON or YAML; OpenAPI 3.0, 3.1 or Swagger
// 2.0) to a Catalog. Swagger 2.0 is converted with kin-openapi's openapi2conv;
// everything else is read straight from JSON into this package's lean wire
// structures (wire.go) with lazily resolved references (resolve.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"golang.org/x/sync/semaphore"
)

// MaxDocumentBytes is the largest OpenAPI document Load translates, 64 MiB
// (Microsoft Graph's beta description is 45 MiB). A caller that fetches a
// document needs to read no more than this; discovery documents keep their
// own, far smaller caps.
const MaxDocumentBytes = 64 << 20

// smallDocument is the size under which a document translates without
// waiting for the translations of others.
const smallDocument = 1 << 20

// translating bounds the documents being translated at once to
// MaxDocumentBytes of weight (translationWeight), so that two large documents
// never peak together: a translation's memory is the whole process's,
// whoever calls Load.
var translating = semaphore.NewWeighted(MaxDocumentBytes)

// translationWeight is a document's share of the translating budget: its
// size, and four times that for YAML (capped at the budget), whose tree costs
// about 18 times the document's size, against about 5 times for JSON
// (BENCHMARKS.md).
func translationWeight(data []byte) int64 {
	n := int64(len(data))
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		n = min(4*n, MaxDocumentBytes)
	}
	return n
}

// Load translates an OpenAPI document into a Catalog. docURL is where the
// document was fetched from (relative server URLs resolve against it); it
// may be empty, in which case only absolute servers can be called. Load
// does not validate the document strictly: what it cannot translate is
// listed in Catalog.Skipped, and only a document it cannot read at all is an
// error (ErrInvalidDocument), as is one over MaxDocumentBytes. A document
// weighing 1 MiB or more waits while others being translated would take the
// total over MaxDocumentBytes, or until ctx is done.
func Load(ctx context.Context, data []byte, docURL string, opts *Options) (*Catalog, error) {
	o := opts.withDefaults()
	if !validPrefix.MatchString(o.Prefix) {
		return nil, newError("invalid_arguments", "prefix %q must match ^[a-zA-Z0-9_-]{0,32}$", o.Prefix)
	}
	var base *url.URL
	if docURL != "" {
		u, err := url.Parse(docURL)
		if err != nil || !u.IsAbs() {
			return nil, newError("invalid_arguments", "document URL %q is not an absolute URL", docURL)
		}
		base = u
	}
	if len(data) > MaxDocumentBytes {
		return nil, newError("invalid_document", "the document is %.1f MiB, over the limit of %d MiB", float64(len(data))/(1<<20), MaxDocumentBytes>>20)
	}
	if n := translationWeight(data); n >= smallDocument {
		if err := translating.Acquire(ctx, n); err != nil {
			return nil, fmt.Errorf("openapi2tools: waiting for another document's translation: %w", err)
		}
		defer translating.Release(n)
	}
	raw, top, err := readDocument(data)
	if err != nil {
		return nil, err
	}
	b := &builder{
		opts:     o,
		r:        newResolver(raw, top),
		base:     base,
		hosts:    map[string]bool{},
		cat:      &Catalog{DocURL: docURL, Resource: o.Resource},
		patterns: map[string]string{},
	}
	return b.build(ctx, top)
}

func invalidDocument(format string, args ...any) error {
	return newError("invalid_document", format, args...)
}

// readDocument returns the document as OpenAPI 3.x JSON and its top level.
func readDocument(data []byte) (json.RawMessage, *wireTop, error) {
	raw := bytes.TrimSpace(data)
	if len(raw) == 0 {
		return nil, nil, invalidDocument("empty document")
	}
	if raw[0] != '{' {
		var err error
		if raw, err = yamlToJSON(raw); err != nil {
			return nil, nil, err
		}
	}
	top, err := decodeTop(raw)
	if err != nil {
		return nil, nil, invalidDocument("cannot read the document: %v", err)
	}
	switch {
	case strings.HasPrefix(top.OpenAPI, "3."):
		return raw, top, nil
	case top.Swagger == "2.0":
		return fromSwagger2(raw)
	case top.OpenAPI != "":
		return nil, nil, invalidDocument("openapi %q is not supported (3.0 and 3.1 are)", top.OpenAPI)
	}
	return nil, nil, invalidDocument(`neither "openapi" nor "swagger" is set`)
}

// fromSwagger2 converts a Swagger 2.0 document to OpenAPI 3.0 JSON.
func fromSwagger2(raw []byte) (json.RawMessage, *wireTop, error) {
	var doc2 openapi2.T
	if err := json.Unmarshal(raw, &doc2); err != nil {
		return nil, nil, invalidDocument("swagger 2.0: %v", err)
	}
	doc3, err := convertSwagger2(&doc2)
	if err != nil {
		return nil, nil, invalidDocument("swagger 2.0: %v", err)
	}
	out, err := json.Marshal(doc3)
	if err != nil {
		return nil, nil, invalidDocument("swagger 2.0: %v", err)
	}
	top, err := decodeTop(out)
	if err != nil {
		return nil, nil, invalidDocument("swagger 2.0: %v", err)
	}
	return out, top, nil
}

// convertSwagger2 runs openapi2conv, turning a panic on a malformed document
// (it trusts its input more than we may) into an error.
func convertSwagger2(doc2 *openapi2.T) (v3 any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("conversion failed: %v", p)
		}
	}()
	return openapi2conv.ToV3(doc2)
}

// builder translates one document. Not safe for concurrent use.
type builder struct {
	opts    Options
	r       *resolver
	base    *url.URL
	servers []wireServer // the document's
	hosts   map[string]bool
	cat     *Catalog
	// patterns are ecmaPattern's answers, read once per document.
	patterns map[string]string
}

func (b *builder) build(ctx context.Context, top *wireTop) (*Catalog, error) {
	var info wireInfo
	_ = json.Unmarshal(top.Info, &info) // a malformed info costs only the title
	b.cat.Title, b.cat.Version = trimText(info.Title, 200), trimText(info.Version, 50)
	_ = json.Unmarshal(top.Servers, &b.servers)
	paths := top.Paths
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, path := range keys {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("openapi2tools: %w", err)
		}
		b.pathItem(path, paths[path])
	}
	toolNamer{prefix: b.opts.Prefix}.assign(b.cat.Tools)
	for h := range b.hosts {
		b.cat.Hosts = append(b.cat.Hosts, h)
	}
	sort.Strings(b.cat.Hosts)
	if err := b.cat.indexNames(); err != nil {
		return nil, err
	}
	return b.cat, nil
}

func (b *builder) skip(operation, reason string) {
	b.cat.Skipped = append(b.cat.Skipped, Skip{Operation: operation, Reason: reason})
	b.opts.Logf("openapi2tools: skipped %s: %s", operation, reason)
}

func (b *builder) pathItem(path string, raw json.RawMessage) {
	item, err := decodeRef(b.r, raw, func(p *wirePathItem) string { return p.Ref })
	if err != nil {
		b.skip("* "+path, "path item: "+err.Error())
		return
	}
	for _, m := range item.operations() {
		name := m.method + " " + path
		if len(b.cat.Tools) >= b.opts.MaxOperations {
			b.skip(name, fmt.Sprintf("more than %d operations", b.opts.MaxOperations))
			continue
		}
		var op wireOperation
		if err := json.Unmarshal(m.raw, &op); err != nil {
			b.skip(name, "operation: "+err.Error())
			continue
		}
		if op.OperationID != "" {
			name += " (" + op.OperationID + ")"
		}
		t, err := b.operation(path, m.method, item, &op)
		if err != nil {
			b.skip(name, err.Error())
			continue
		}
		b.cat.Tools = append(b.cat.Tools, *t)
	}
}

// server picks the operation's server (OpenAPI 3.1 §4.8.10: operation servers
// override path servers, which override the document's) and records every
// host those levels name.
func (b *builder) server(item *wirePathItem, op *wireOperation) (string, error) {
	for _, level := range [][]wireServer{op.Servers, item.Servers, b.servers} {
		if len(level) == 0 {
			continue
		}
		chosen, err := serverURL(level[0], b.base)
		if err != nil {
			return "", err
		}
		for _, s := range level {
			if u, err := serverURL(s, b.base); err == nil {
				b.addHost(u)
			}
		}
		return chosen, nil
	}
	// OpenAPI 3.1 §4.8.1.1: without servers, the default is a Server Object
	// with url "/" (relative to the document).
	u, err := serverURL(wireServer{URL: "/"}, b.base)
	b.addHost(u)
	return u, err
}

func (b *builder) addHost(u string) {
	if p, err := url.Parse(u); err == nil && p.IsAbs() && p.Host != "" {
		b.hosts[canonicalHost(p)] = true
	}
}

// canonicalHost is host[:port] in lower case, without a default port.
func canonicalHost(u *url.URL) string {
	h, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + port
	}
	return h + ":" + port
}

// annotations derive from the method's semantics (RFC 9110 §9.2.1 safe,
// §9.2.2 idempotent). Every operation reaches an outside system (openWorld).
func annotations(method, title string) Annotations {
	t, f := true, false
	a := Annotations{Title: title, ReadOnlyHint: &f, DestructiveHint: &f, IdempotentHint: &f, OpenWorldHint: &t}
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		a.ReadOnlyHint, a.IdempotentHint = &t, &t
	case "DELETE":
		a.DestructiveHint, a.IdempotentHint = &t, &t
	case "PUT":
		a.IdempotentHint = &t
	}
	return a
}
