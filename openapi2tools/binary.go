package openapi2tools

// This file stores a translated Catalog, so a second start reuses it from the
// store instead of translating the document again. The format is gob behind a
// versioned magic line; a blob of another version is an error, and the caller
// translates again.

import (
	"bytes"
	"encoding/gob"
	"fmt"
)

const binaryMagic = "poppy-openapi2tools catalog v1\n"

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
