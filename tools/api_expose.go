package tools

// This file announces a tool per API operation (docs/tools.md): once a Session
// with a Company exists, when all its OpenAPI APIs together have at most
// Options.MaxAPITools operations, each becomes a tool named under the
// Company's prefix. mcp-go's AddTools and DeleteTools send
// notifications/tools/list_changed. The tools are the server's own, not a
// session's, so stateless (2026-07-28) clients see them too.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
	"github.com/poppy-mcp/poppy-mcp/openapi2tools"
)

// defaultMaxAPITools is Options.MaxAPITools when zero.
const defaultMaxAPITools = 30

// LoadAPITools translates an OpenAPI document into the MCP tools poppy-mcp
// announces for it when the Company at domain lists it first among its
// APIs: what `poppy-mcp openapi` prints. docURL is where the document was
// read (relative servers resolve against it; it may be empty). domain ""
// means no prefix.
func LoadAPITools(ctx context.Context, data []byte, docURL, domain string) (*openapi2tools.Catalog, []mcp.Tool, error) {
	prefix := ""
	if domain != "" {
		prefix = APIToolPrefix(domain)
	}
	cat, err := loadCatalog(ctx, data, docURL, prefix, "", nil)
	if err != nil {
		return nil, nil, err
	}
	out := make([]mcp.Tool, len(cat.Tools))
	for i := range cat.Tools {
		out[i] = operationTool(&cat.Tools[i], domain)
	}
	return cat, out, nil
}

// operationTool is an operation of the Company at domain as an MCP tool:
// its schema byte for byte, every annotation as openapi2tools derived it,
// and its description and title, which the Company wrote, marked as its
// words the way relayed MCP tools' are, with nothing hidden.
func operationTool(t *openapi2tools.Tool, domain string) mcp.Tool {
	m := mcp.NewToolWithRawSchema(t.Name, companyDescription(domain, "API operation", t.Description), t.InputSchema)
	m.Annotations = mcp.ToolAnnotation{
		Title:           untrusted.Text(t.Annotations.Title, 200),
		ReadOnlyHint:    t.Annotations.ReadOnlyHint,
		DestructiveHint: t.Annotations.DestructiveHint,
		IdempotentHint:  t.Annotations.IdempotentHint,
		OpenWorldHint:   t.Annotations.OpenWorldHint,
	}
	return m
}

// announce runs once a Session exists, for one of the Company's domains
// (Server.sessionReady): it loads the domain's catalogs and announces its
// operations as tools of the person's MCP server when they are few enough.
func (ap *apis) announce(ctx context.Context, cs *agent.Company, co *discovery.Company) {
	entries := ap.load(ctx, co)
	if err := ap.claimPrefixes(co, entries); err != nil {
		ap.log.WarnContext(ctx, "API operations not announced as tools", "domain", co.Domain, "err", err)
		return
	}
	cs.Person().StartAnnouncing(companyPrefix(co)) // from now on, refresh keeps them current
	ap.refresh(ctx, cs.Person(), co, entries)
}

// claimPrefixes claims the tool-name prefixes of the Company's APIs
// for its issuer.
func (ap *apis) claimPrefixes(co *discovery.Company, entries []*companyAPI) error {
	if co.Document == nil || co.Document.Auth == nil {
		return errors.New("tools: the Company has no auth.issuer to own its tools")
	}
	prefixes := []string{companyPrefix(co)}
	for _, a := range entries {
		prefixes = append(prefixes, a.prefix)
	}
	return ap.names.claim(co.Document.Auth.Issuer, prefixes...)
}

// refresh makes the announced tools of a Company match its
// catalogs, for the person p, once their Session exists: tools appear,
// change or go, each change announced once to that person's MCP sessions.
// Nothing is sent when nothing changed. The tools under a prefix another
// Company owns are left alone.
func (ap *apis) refresh(ctx context.Context, p *agent.Person, co *discovery.Company, entries []*companyAPI) {
	prefix := companyPrefix(co)
	if _, started := p.Announced(prefix); !started || ap.claimPrefixes(co, entries) != nil {
		return
	}
	want, known := ap.wantedTools(co, entries)
	if !known {
		return
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	have, started := p.Announced(prefix)
	if !started {
		return
	}
	gone, add := toolChanges(have, want)
	// Holding mu keeps two refreshes from interleaving their announcements.
	srv := ap.mcp(p)
	if len(gone) > 0 {
		srv.DeleteTools(gone...)
	}
	if len(add) > 0 {
		srv.AddTools(add...)
	}
	next := make(map[string]string, len(want))
	for name, w := range want {
		next[name] = w.def
	}
	p.SetAnnounced(prefix, next)
	if len(gone)+len(add) > 0 {
		ap.log.InfoContext(ctx, "API operation tools announced", "company", co.Domain, "tools", len(next), "added", len(add), "removed", len(gone))
	}
}

// toolChanges are the tools announced (have: name -> definition) that go,
// and those of want that are new or changed, in name order.
func toolChanges(have map[string]string, want wantedTools) (gone []string, add []server.ServerTool) {
	for name := range have {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if have[name] != want[name].def {
			add = append(add, want[name].ServerTool)
		}
	}
	return gone, add
}

// wantedTool is a per-operation tool with its definition as JSON, to see
// whether an announced one changed.
type wantedTool struct {
	server.ServerTool
	def string
}

// wantedTools are the per-operation tools wanted, by name.
type wantedTools map[string]wantedTool

// wantedTools are the tools a Company's operations should be now: none when
// there are more than the limit, and under read-only only the GET and HEAD
// ones. It reports false when a document could not
// be read: what is announced then stays, rather than flap on a passing failure.
func (ap *apis) wantedTools(co *discovery.Company, entries []*companyAPI) (wantedTools, bool) {
	limit := ap.maxTools
	if limit == 0 {
		limit = defaultMaxAPITools
	}
	total := 0
	for _, a := range entries {
		if a.cat == nil {
			return nil, false
		}
		for i := range a.cat.Tools {
			if ap.policy.operation(a.cat.Tools[i].Method) {
				total++ // the tools there would be
			}
		}
	}
	if total > limit {
		return nil, true
	}
	want := wantedTools{}
	for _, a := range entries {
		for i := range a.cat.Tools {
			t := &a.cat.Tools[i]
			if !ap.policy.operation(t.Method) {
				continue // read-only: not a GET or HEAD operation (toolsets.go)
			}
			m := operationTool(t, co.Domain)
			def, _ := json.Marshal(m)
			want[t.Name] = wantedTool{server.ServerTool{Tool: m, Handler: ap.operationHandler(co.Domain, t.Name)}, string(def)}
		}
	}
	return want, true
}

// operationHandler calls one operation with the tool's arguments.
func (ap *apis) operationHandler(domain, name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return ap.callOperation(ctx, domain, name, req.GetArguments()), nil
	}
}

// exposedTools returns the names of the tools announced to the person p
// under prefix.
func (ap *apis) exposedTools(p *agent.Person, prefix string) map[string]bool {
	have, _ := p.Announced(prefix)
	out := make(map[string]bool, len(have))
	for name := range have {
		out[name] = true
	}
	return out
}
