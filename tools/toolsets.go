package tools

// This file is the one table of which tools a Server serves (docs/tools.md
// "Toolsets and read-only"): each tool's group, which serve --toolsets
// turns on or off, and whether it writes at a Company, which serve
// --read-only hides. A hidden tool is never registered with mcp-go, so it is
// neither listed nor callable by name: the call gets mcp-go's "tool not
// found", the same as a tool that never existed. The Company's tools follow
// the same rules: a per-operation tool is in "apis" and writes unless its
// method is GET or HEAD; a relayed MCP tool is in "relay" and always counts
// as writing, since its readOnlyHint is the Company's claim, not a
// guarantee.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The tool groups (serve --toolsets).
const (
	groupDiscovery     = "discovery" // always on
	groupSignIn        = "signin"
	groupConversations = "conversations"
	groupAPIs          = "apis"
	groupRelay         = "relay"
	groupWeb           = "web"
)

// allToolsets is the name that turns every group on.
const allToolsets = "all"

// groups are the tool groups, in the order docs/tools.md lists them.
func groups() []string {
	return []string{groupDiscovery, groupSignIn, groupConversations, groupAPIs, groupRelay, groupWeb}
}

// effect is what a tool does at a Company, as read-only sees it.
type effect int

const (
	// reads: reads, or acts on the person's own standing (a Session, a
	// sign-in): kept under read-only.
	reads effect = iota
	// writes: changes something at a Company: hidden under read-only.
	writes
	// perCall: writes for some arguments only: kept under read-only, each
	// call that would write refused (call_api: operations other than GET
	// and HEAD).
	perCall
)

// toolEntry is one built-in tool's row in the table.
type toolEntry struct {
	group  string
	effect effect
}

// toolEntries are built-in tools' groups and effects, by tool name.
type toolEntries map[string]toolEntry

// toolTable is every built-in tool's group and effect. A built-in tool
// missing from it is a mistake New panics on, which every test finds.
// The tool of each sign-in kind (signInToolTable) is in the signin group.
func toolTable() toolEntries {
	t := toolEntries{
		"discover_company": {groupDiscovery, reads},
		"start_session":    {groupDiscovery, reads},

		"sign_in_status": {groupSignIn, reads},
		"sign_out":       {groupSignIn, reads},

		"send_message":              {groupConversations, writes},
		"read_events":               {groupConversations, reads},
		"request_human":             {groupConversations, writes},
		"close_conversation":        {groupConversations, writes},
		"list_conversations":        {groupConversations, reads},
		"start_direct_conversation": {groupConversations, writes},

		"list_api_operations":    {groupAPIs, reads},
		"describe_api_operation": {groupAPIs, reads},
		"call_api":               {groupAPIs, perCall},

		"open_website": {groupWeb, reads},
		"browse_page":  {groupWeb, reads},
	}
	for _, k := range signInToolTable() {
		t[k.name] = toolEntry{groupSignIn, reads}
	}
	return t
}

// Toolsets are the tool groups a Server serves (Options.Toolsets), as
// ParseToolsets reads them. The zero value serves every group.
type Toolsets struct {
	on nameSet // the groups on; nil: every group
}

// ParseToolsets reads a comma-separated list of tool groups (serve
// --toolsets, POPPY_TOOLSETS): discovery, signin, conversations, apis,
// relay, web, or all. discovery is always on; an empty list is all. An
// unknown name is an error that names the known ones.
func ParseToolsets(list string) (Toolsets, error) {
	on, all := nameSet{}, false
	for _, name := range strings.Split(list, ",") {
		switch name = strings.ToLower(strings.TrimSpace(name)); {
		case name == "":
		case name == allToolsets:
			all = true
		case slices.Contains(groups(), name):
			on[name] = true
		default:
			return Toolsets{}, fmt.Errorf("tools: unknown tool group %q: the groups are %s, or %s", name, strings.Join(groups(), ", "), allToolsets)
		}
	}
	if all || len(on) == 0 {
		return Toolsets{}, nil
	}
	on[groupDiscovery] = true // discover_company and start_session: always served
	return Toolsets{on: on}, nil
}

// Has reports whether the group is served.
func (ts Toolsets) Has(group string) bool { return ts.on == nil || ts.on[group] }

// String is the groups served, comma-separated, or "all".
func (ts Toolsets) String() string {
	if ts.on == nil {
		return allToolsets
	}
	var out []string
	for _, g := range groups() {
		if ts.on[g] {
			out = append(out, g)
		}
	}
	return strings.Join(out, ",")
}

// ToolGroups are the tool groups serve --toolsets takes, without "all".
func ToolGroups() []string { return groups() }

// policy decides which tools a Server serves: Options.Toolsets and
// Options.ReadOnly applied to the table. It does not change after New.
type policy struct {
	toolsets Toolsets
	readOnly bool
}

// builtin reports whether a built-in tool of the table's row e is served.
func (p policy) builtin(e toolEntry) bool {
	return p.toolsets.Has(e.group) && !(p.readOnly && e.effect == writes)
}

// operations reports whether the Company's API operations get tools at all.
func (p policy) operations() bool { return p.toolsets.Has(groupAPIs) }

// operation reports whether an API operation with this HTTP method may be
// called, through its own tool or call_api: under read-only only GET and
// HEAD (RFC 9110 §9.2.1: safe methods).
func (p policy) operation(method string) bool {
	return !p.readOnly || method == "GET" || method == "HEAD"
}

// relays reports whether the Company's MCP servers are relayed: never under
// read-only, since a relayed tool's readOnlyHint is only the Company's claim.
func (p policy) relays() bool { return p.toolsets.Has(groupRelay) && !p.readOnly }

// filter keeps the built-in tools served. A tool missing from the table
// is a mistake it panics on.
func (p policy) filter(all []tool) []tool {
	table := toolTable()
	var out []tool
	for _, t := range all {
		e, ok := table[t.tool.Name]
		if !ok {
			panic("tools: " + t.tool.Name + " is not in the tool table (toolsets.go)")
		}
		if p.builtin(e) {
			out = append(out, t)
		}
	}
	return out
}

// instructions are the MCP server's instructions, with what read-only
// means for the model.
func (p policy) instructions() string {
	if !p.readOnly {
		return instructions
	}
	return instructions + " This poppy-mcp is read-only: it sends no message and calls only GET and HEAD API operations; " +
		"tell the user when a task needs more."
}

// unoffered are the built-in tools the table has that this policy does not
// serve, sorted.
func (p policy) unoffered() []string {
	var out []string
	for name, e := range toolTable() {
		if !p.builtin(e) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// why is what hides a tool, as the model is told: read-only or the groups.
func (p policy) why() string {
	switch {
	case p.readOnly && p.toolsets.on != nil:
		return "it is read-only and serves only the tool groups " + p.toolsets.String()
	case p.readOnly:
		return "it is read-only"
	}
	return "it serves only the tool groups " + p.toolsets.String()
}

// noteUnoffered is tool-call middleware: a result whose summary names a
// built-in tool this Server does not serve (advice such as "reply with
// send_message" is written once, for every policy) gets a sentence that
// says so, so that the model tells the user instead of calling a tool that
// is not there.
func (p policy) noteUnoffered(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	hidden := p.unoffered()
	if len(hidden) == 0 {
		return next
	}
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := next(ctx, req)
		if err != nil || res == nil || len(res.Content) == 0 {
			return res, err
		}
		tc, ok := res.Content[0].(mcp.TextContent)
		if !ok {
			return res, err
		}
		var named []string
		for _, name := range hidden {
			if namesTool(tc.Text, name) {
				named = append(named, name)
			}
		}
		if len(named) > 0 {
			tc.Text += fmt.Sprintf("\nThis poppy-mcp does not offer %s: %s. Tell the user when a task needs it.", strings.Join(named, ", "), p.why())
			res.Content[0] = tc
		}
		return res, err
	}
}

// namesTool reports whether text names the tool as a word of its own, not
// as part of a longer name.
func namesTool(text, name string) bool {
	word := func(b byte) bool { return b == '_' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		at, end := i+j, i+j+len(name)
		if (at == 0 || !word(text[at-1])) && (end == len(text) || !word(text[end])) {
			return true
		}
		i = end
	}
}
