package mcpproxy

// This file lists the upstream's tools (MCP 2025-11-25 "Tools", "Pagination")
// raw, page after page, and turns each into the definition relayed
// downstream: the schemas byte for byte, the name prefixed and made valid
// and unique (names.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// maxPages bounds how many tools/list pages are followed.
const maxPages = 100

// Tool is one upstream tool as relayed.
type Tool struct {
	// Name is the relayed name: Prefix and the upstream's name, made valid
	// (^[a-zA-Z0-9_-]{1,64}$) and unique, the same on every run.
	Name string
	// Upstream is the tool's name at the upstream, for Call.
	Upstream string
	// Def is the definition to announce: named Name, with the upstream's
	// input and output schemas as raw bytes, and every annotation set (those
	// the upstream left out at MCP's defaults: not read-only, destructive,
	// not idempotent, open world).
	Def mcp.Tool
	// Raw is the upstream's tool object as listed.
	Raw json.RawMessage
}

// toolWire is a Tool of tools/list, as it comes.
type toolWire struct {
	Name         string              `json:"name"`
	Title        string              `json:"title"`
	Description  string              `json:"description"`
	InputSchema  json.RawMessage     `json:"inputSchema"`
	OutputSchema json.RawMessage     `json:"outputSchema"`
	Annotations  *mcp.ToolAnnotation `json:"annotations"`
	Meta         *mcp.Meta           `json:"_meta"`
	Icons        []mcp.Icon          `json:"icons"`
	Execution    *mcp.ToolExecution  `json:"execution"`
}

// listWire is a tools/list result.
type listWire struct {
	Tools      []json.RawMessage `json:"tools"`
	NextCursor string            `json:"nextCursor"`
}

// Tools lists the upstream's tools, following every page, connecting first
// when needed. Tools that cannot be relayed are left out and logged: no
// name, an input schema that is not a JSON object, a task-only tool, or
// x-mcp-header annotations mcp-go refuses.
func (u *Upstream) Tools(ctx context.Context) ([]Tool, error) {
	var raws []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("mcpproxy: tools/list at %s has more than %d pages", u.url, maxPages)
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := u.request(ctx, string(mcp.MethodToolsList), params)
		if err != nil {
			return nil, err
		}
		var w listWire
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("mcpproxy: tools/list at %s: %w", u.url, err)
		}
		raws = append(raws, w.Tools...)
		if w.NextCursor == "" {
			break
		}
		if seen[w.NextCursor] {
			return nil, fmt.Errorf("mcpproxy: tools/list at %s repeats cursor %q", u.url, untrusted.Text(w.NextCursor, 40))
		}
		seen[w.NextCursor], cursor = true, w.NextCursor
	}
	return u.relayable(raws), nil
}

// relayable turns listed tools into relayed ones.
func (u *Upstream) relayable(raws []json.RawMessage) []Tool {
	var out []Tool
	var upstream []string
	for _, raw := range raws {
		t, err := relayTool(raw)
		if err != nil {
			u.log.Info("mcpproxy: a tool is not relayed", "url", u.url, "err", err)
			continue
		}
		out = append(out, t)
		upstream = append(upstream, t.Upstream)
	}
	names := relayNames(u.opts.Prefix, upstream)
	kept := out[:0]
	for _, t := range out {
		name, ok := names[t.Upstream]
		if !ok {
			u.log.Info("mcpproxy: a tool's name is listed twice; only the first is relayed", "url", u.url, "tool", untrusted.Text(t.Upstream, 80))
			continue
		}
		delete(names, t.Upstream)
		t.Name, t.Def.Name = name, name
		kept = append(kept, t)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })
	return kept
}

// relayTool checks one listed tool and builds its definition.
func relayTool(raw json.RawMessage) (Tool, error) {
	var w toolWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return Tool{}, fmt.Errorf("tool is not an object: %w", err)
	}
	if w.Name == "" {
		return Tool{}, fmt.Errorf("tool without a name")
	}
	if !isObject(w.InputSchema) {
		return Tool{}, fmt.Errorf("tool %q: inputSchema is not a JSON object", untrusted.Text(w.Name, 80))
	}
	if w.Execution != nil && w.Execution.TaskSupport == mcp.TaskSupportRequired {
		return Tool{}, fmt.Errorf("tool %q can only run as a task", untrusted.Text(w.Name, 80))
	}
	def := mcp.NewToolWithRawSchema(w.Name, w.Description, w.InputSchema)
	if isObject(w.OutputSchema) {
		def.RawOutputSchema = w.OutputSchema
	}
	var claims map[string]bool
	def.Annotations, claims = annotationsOf(w)
	def.Title, def.Meta, def.Icons = untrusted.Text(w.Title, maxTitle), withClaims(w.Meta, claims), w.Icons
	if err := mcp.ValidateParamHeaderAnnotations(&def); err != nil {
		return Tool{}, fmt.Errorf("tool %q: %w", untrusted.Text(w.Name, 80), err)
	}
	return Tool{Upstream: w.Name, Def: def, Raw: raw}, nil
}

// annotationsOf gives a relayed tool MCP's most cautious hints, which are
// also MCP 2025-11-25's defaults ("ToolAnnotations"): not read-only,
// destructive, not idempotent, open world. A client may approve a tool
// marked read-only without asking, so the Company's claim must not lower
// caution: a hint that says the tool is safer than that is returned in
// claims, for _meta (CompanyAnnotationsKey), where a client can show it as
// the Company's word. Hints as cautious as the defaults need no keeping.
func annotationsOf(w toolWire) (a mcp.ToolAnnotation, claims map[string]bool) {
	a = mcp.ToolAnnotation{
		ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true),
		IdempotentHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(true),
	}
	if up := w.Annotations; up != nil {
		a.Title = up.Title
		claims = map[string]bool{}
		claim := func(name string, p *bool, cautious bool) {
			if p != nil && *p != cautious {
				claims[name] = *p
			}
		}
		claim("readOnlyHint", up.ReadOnlyHint, false)
		claim("destructiveHint", up.DestructiveHint, true)
		claim("idempotentHint", up.IdempotentHint, false)
		claim("openWorldHint", up.OpenWorldHint, true)
		if len(claims) == 0 {
			claims = nil
		}
	}
	if a.Title == "" {
		a.Title = w.Title
	}
	if a.Title == "" {
		a.Title = w.Name
	}
	// A title is the Company's words a client shows: nothing hidden in it.
	a.Title = untrusted.Text(a.Title, maxTitle)
	return a, claims
}

// CompanyAnnotationsKey is the _meta key of a relayed tool's definition
// under which the hints the Company claimed, safer than poppy-mcp shows
// them, are kept: {"readOnlyHint": true, ...}.
const CompanyAnnotationsKey = "poppy/company_annotations"

// withClaims returns the upstream's _meta for a definition with the
// Company's claimed hints added under CompanyAnnotationsKey; ours win, so
// the upstream cannot set that key itself.
func withClaims(meta *mcp.Meta, claims map[string]bool) *mcp.Meta {
	if meta != nil && meta.AdditionalFields != nil {
		delete(meta.AdditionalFields, CompanyAnnotationsKey)
	}
	if claims == nil {
		return meta
	}
	if meta == nil {
		meta = &mcp.Meta{}
	}
	if meta.AdditionalFields == nil {
		meta.AdditionalFields = map[string]any{}
	}
	meta.AdditionalFields[CompanyAnnotationsKey] = claims
	return meta
}

// maxTitle is the budget of a relayed tool's title, in bytes.
const maxTitle = 200

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(raw) > 0 && json.Unmarshal(raw, &m) == nil && m != nil
}
