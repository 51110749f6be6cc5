// Package openapi2tools turns a Company's OpenAPI document into tool
// definitions a model can use, and a model's arguments into HTTP requests.
//
// This file implements the public types. See Poppy 0.1 §6 ("APIs"): an API of
// type openapi is "an OpenAPI document at url; calls go to its servers", with a
// DPoP Session Token (§4.3). The token is not this package's business: requests
// built here are sent through the Session's *http.Client (package auth), which
// signs them. openapi2tools never builds an auth header.
//
// Load reads OpenAPI 3.0 and 3.1 (JSON or YAML) and Swagger 2.0 (converted with
// kin-openapi's openapi2conv). It decodes JSON into lean structures of its own
// and resolves local $refs lazily, so a document the size of GitHub's (13 MB)
// translates in a fraction of a second. What cannot be translated is listed in
// Catalog.Skipped with the reason, never silently lost.
//
// Tool names and argument names follow docs/tools.md ("API arguments"):
// names match ^[a-zA-Z0-9_-]{1,64}$ after Options.Prefix, are unique, and are
// stable across runs; where a path, query, header, cookie parameter or body
// field share a name, every colliding argument is prefixed with its location
// (path_order_id, body_order_id, ...).
package openapi2tools

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Options configure Load. A nil *Options means all defaults.
type Options struct {
	// Prefix is put before every tool name, e.g. "ex_" for example.com.
	// It must match ^[a-zA-Z0-9_-]{0,32}$. Zero means no prefix.
	Prefix string
	// MaxDescription is the budget for a tool description, in characters.
	// Zero means 300. Property descriptions get 120.
	MaxDescription int
	// MaxOperations caps how many operations are translated; the rest are
	// listed in Catalog.Skipped. Zero means 10,000.
	MaxOperations int
	// Resource is the apis[] entry's resource from poppy.json (Poppy 0.1 §4.3
	// "Narrower tokens"), kept on the Catalog so the caller can pick the
	// *http.Client holding a token for it. Zero means none.
	Resource string
	// Logf, if set, is told about each skipped operation. Zero means silence.
	Logf func(format string, args ...any)
}

const (
	defaultMaxDescription = 300
	propertyDescription   = 120
	defaultMaxOperations  = 10000
)

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.MaxDescription <= 0 {
		v.MaxDescription = defaultMaxDescription
	}
	if v.MaxOperations <= 0 {
		v.MaxOperations = defaultMaxOperations
	}
	if v.Logf == nil {
		v.Logf = func(string, ...any) {}
	}
	return v
}

// Catalog is a translated OpenAPI document. It is immutable once returned by
// Load or UnmarshalCatalog and safe for concurrent reads (Tool, Search,
// NewRequest, Call) from many goroutines.
type Catalog struct {
	// Title and Version are the document's info.title and info.version.
	Title, Version string
	// DocURL is the URL the document was read from; relative servers resolve
	// against it.
	DocURL string
	// Resource is Options.Resource: the token resource this API needs, if any.
	Resource string
	// Tools are the operations, sorted by path and then method.
	Tools []Tool
	// Skipped lists the operations that could not be translated, and why.
	Skipped []Skip
	// Hosts are the hosts (host or host:port, lower case) the document's
	// servers name; requests go nowhere else.
	Hosts []string

	byName map[string]int

	searchOnce sync.Once
	index      []searchEntry // built on first Search
}

// Skip is an operation Load left out.
type Skip struct {
	Operation string `json:"operation"` // "METHOD /path", with the operationId if any
	Reason    string `json:"reason"`
}

// Tool is one operation as a tool. It marshals to exactly the MCP Tool JSON
// shape {"name","description","inputSchema","annotations"}. A Tool is
// read-only once built and safe for concurrent use.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations Annotations     `json:"annotations"`

	// Method is the HTTP method in upper case; Path the path template.
	Method string `json:"-"`
	Path   string `json:"-"`
	// OperationID, Summary and Tags are as the document gives them.
	OperationID string   `json:"-"`
	Summary     string   `json:"-"`
	Tags        []string `json:"-"`
	Deprecated  bool     `json:"-"`

	server string    // base URL of the first applicable server
	args   []arg     // every argument, in schema order
	body   *bodySpec // nil when the operation takes no body
}

// Annotations are MCP tool annotations, derived from the HTTP method.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Argument locations.
const (
	inPath   = "path"
	inQuery  = "query"
	inHeader = "header"
	inCookie = "cookie"
	inBody   = "body"  // one top-level field of an object body
	inWhole  = "whole" // the entire body, as the argument "body"
)

// arg routes one model-facing argument to where it goes in the request.
type arg struct {
	Name     string // the argument's name in the input schema
	In       string // inPath, inQuery, inHeader, inCookie, inBody, inWhole
	Key      string // the name on the wire
	Required bool
	Style    string // OpenAPI style, defaulted by location
	Explode  bool
	Binary   bool // a multipart file part
}

// bodySpec says how the body is encoded.
type bodySpec struct {
	MediaType string // e.g. application/json
	Required  bool
}

// Tool returns the tool with the given name.
func (c *Catalog) Tool(name string) (*Tool, bool) {
	i, ok := c.byName[name]
	if !ok {
		return nil, false
	}
	return &c.Tools[i], true
}

func (c *Catalog) indexNames() error {
	c.byName = make(map[string]int, len(c.Tools))
	for i := range c.Tools {
		n := c.Tools[i].Name
		if _, dup := c.byName[n]; dup {
			return fmt.Errorf("openapi2tools: duplicate tool name %q", n)
		}
		c.byName[n] = i
	}
	return nil
}

// Error is the package's error type. Compare with errors.Is against the
// Err* values, which match by Code.
type Error struct {
	Code    string // one of the Err* codes
	Message string // what went wrong, for a person or a model
}

func (e *Error) Error() string { return "openapi2tools: " + e.Message }

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Errors returned by this package, matched by code with errors.Is.
var (
	ErrInvalidDocument  = &Error{Code: "invalid_document", Message: "invalid document"}
	ErrUnknownTool      = &Error{Code: "unknown_tool", Message: "unknown tool"}
	ErrInvalidArguments = &Error{Code: "invalid_arguments", Message: "invalid arguments"}
	ErrNoServer         = &Error{Code: "no_server", Message: "no usable server URL"}
	ErrForeignHost      = &Error{Code: "foreign_host", Message: "host not named by the document"}
)

func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// A translated Catalog is stored, so a second start reuses it from the
// store instead of translating the document again. The format is gob behind
// a versioned magic line; a blob of another version is an error, and the
// caller translates again. v2: patterns are ECMA-262 in Unicode mode
// (pattern.go), so a catalog stored with v1's Go-checked patterns is
// translated again rather than served.

const binaryMagic = "poppy-openapi2tools catalog v2\n"

// storedCatalog and storedTool are the stored form (wire structs apart from
// the API types, whose routing fields are unexported).
type storedCatalog struct {
	Title, Version, DocURL, Resource string
	Tools                            []storedTool
	Skipped                          []Skip
	Hosts                            []string
}

type storedTool struct {
	Name, Description string
	InputSchema       []byte
	Title             string
	Hints             string // readOnly, destructive, idempotent, openWorld: 't', 'f' or 'n' (unset)
	Method, Path      string
	OperationID       string
	Summary           string
	Tags              []string
	Deprecated        bool
	Server            string
	Args              []arg
	Body              *bodySpec
}

// MarshalBinary encodes the catalog for UnmarshalCatalog.
func (c *Catalog) MarshalBinary() ([]byte, error) {
	s := storedCatalog{Title: c.Title, Version: c.Version, DocURL: c.DocURL, Resource: c.Resource,
		Skipped: c.Skipped, Hosts: c.Hosts, Tools: make([]storedTool, len(c.Tools))}
	for i := range c.Tools {
		t := &c.Tools[i]
		s.Tools[i] = storedTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Title: t.Annotations.Title, Hints: encodeHints(t.Annotations), Method: t.Method, Path: t.Path,
			OperationID: t.OperationID, Summary: t.Summary, Tags: t.Tags, Deprecated: t.Deprecated,
			Server: t.server, Args: t.args, Body: t.body}
	}
	var buf bytes.Buffer
	buf.WriteString(binaryMagic)
	if err := gob.NewEncoder(&buf).Encode(&s); err != nil {
		return nil, fmt.Errorf("openapi2tools: encoding catalog: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalCatalog decodes what MarshalBinary wrote.
func UnmarshalCatalog(data []byte) (*Catalog, error) {
	rest, ok := bytes.CutPrefix(data, []byte(binaryMagic))
	if !ok {
		return nil, newError("invalid_document", "stored catalog has another format version")
	}
	var s storedCatalog
	if err := gob.NewDecoder(bytes.NewReader(rest)).Decode(&s); err != nil {
		return nil, newError("invalid_document", "stored catalog: %v", err)
	}
	c := &Catalog{Title: s.Title, Version: s.Version, DocURL: s.DocURL, Resource: s.Resource,
		Skipped: s.Skipped, Hosts: s.Hosts, Tools: make([]Tool, len(s.Tools))}
	for i, t := range s.Tools {
		if !validToolName.MatchString(t.Name) {
			return nil, newError("invalid_document", "stored catalog: invalid tool name %q", t.Name)
		}
		c.Tools[i] = Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Annotations: decodeHints(t.Title, t.Hints), Method: t.Method, Path: t.Path, OperationID: t.OperationID,
			Summary: t.Summary, Tags: t.Tags, Deprecated: t.Deprecated, server: t.Server, args: t.Args, body: t.Body}
	}
	if err := c.indexNames(); err != nil {
		return nil, err
	}
	return c, nil
}

// Hints are stored as letters: gob drops a pointer to false.
func encodeHints(a Annotations) string {
	b := make([]byte, 0, 4)
	for _, h := range []*bool{a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint} {
		switch {
		case h == nil:
			b = append(b, 'n')
		case *h:
			b = append(b, 't')
		default:
			b = append(b, 'f')
		}
	}
	return string(b)
}

func decodeHints(title, hints string) Annotations {
	a := Annotations{Title: title}
	for i, dst := range []**bool{&a.ReadOnlyHint, &a.DestructiveHint, &a.IdempotentHint, &a.OpenWorldHint} {
		if i < len(hints) && hints[i] != 'n' {
			v := hints[i] == 't'
			*dst = &v
		}
	}
	return a
}
