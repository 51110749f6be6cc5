package mcpproxy

// This file marks a relayed result as the upstream's content: whatever the
// upstream's text hides is shown, and the client sees whose words follow,
// while every content block the upstream sent that hides nothing stays as
// it was, byte for byte.

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// mark escapes what the result's text hides, then adds the Relay's Meta
// and Note.
func (r *Relay) mark(res *mcp.CallToolResult) {
	hasText := false
	for i, c := range res.Content {
		rc, ok := c.(rawContent)
		if !ok {
			continue
		}
		raw, text := escapeBlock(rc.raw)
		res.Content[i] = rawContent{raw: raw}
		hasText = hasText || text
	}
	if len(res.RawStructuredContent) > 0 {
		res.RawStructuredContent = untrusted.EscapeValues(res.RawStructuredContent) // unchanged when it hides nothing
		res.StructuredContent = res.RawStructuredContent
	}
	if len(r.opts.Meta) > 0 {
		if res.Meta == nil {
			res.Meta = &mcp.Meta{}
		}
		if res.Meta.AdditionalFields == nil {
			res.Meta.AdditionalFields = map[string]any{}
		}
		maps.Copy(res.Meta.AdditionalFields, r.opts.Meta) // ours win: the upstream cannot take the mark off
	}
	if r.opts.Note != "" && hasText {
		res.Content = append([]mcp.Content{mcp.NewTextContent(r.opts.Note)}, res.Content...)
	}
}

// escapeBlock returns a content block with the hidden characters of its
// text (a text block's, or an embedded resource's) shown as escapes (the
// block unchanged when it hides nothing), and whether it has text.
func escapeBlock(raw json.RawMessage) (json.RawMessage, bool) {
	var block map[string]json.RawMessage
	if json.Unmarshal(raw, &block) != nil {
		return raw, false
	}
	var typ string
	_ = json.Unmarshal(block["type"], &typ)
	switch typ {
	case "text":
		text, changed := escapeField(block, "text")
		if !changed {
			return raw, text
		}
		return encode(block), true
	case "resource":
		var res map[string]json.RawMessage
		if json.Unmarshal(block["resource"], &res) != nil {
			return raw, false
		}
		text, changed := escapeField(res, "text")
		if !changed {
			return raw, text
		}
		block["resource"] = encode(res)
		return encode(block), true
	}
	return raw, false
}

// escapeField escapes the string field name of m in place, and reports
// whether m has such a field and whether it changed.
func escapeField(m map[string]json.RawMessage, name string) (has, changed bool) {
	var s string
	if json.Unmarshal(m[name], &s) != nil {
		return false, false
	}
	esc := untrusted.Escape(s)
	if esc == s {
		return true, false
	}
	m[name] = encode(esc)
	return true, true
}

// encode writes v as JSON, leaving <, > and & as they are.
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a map of raw messages, or a string: always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
