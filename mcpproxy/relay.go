package mcpproxy

// This file announces an Upstream's tools on an mcp-go server and keeps them
// in step: a tool that appears is added, one that goes is deleted, one that
// changes is replaced, and mcp-go sends notifications/tools/list_changed to
// every client for each change (docs/mcp-go.md). Tools are registered on
// the server itself, not per client session: 2026-07-28 clients have no
// session to hold them. The results of calls are marked as the upstream's
// content on their way (see mark).

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// RelayOptions configure a Relay. The zero value of every field is usable.
type RelayOptions struct {
	// Describe returns the description a relayed tool is announced with.
	// Nil: the upstream's own.
	Describe func(t Tool) string
	// Failure turns an error of a call (the upstream unreachable, a
	// JSON-RPC error, a sign-in error of the HTTP client) into the result
	// the client reads. Nil: an isError result with the error's text.
	Failure func(ctx context.Context, t Tool, err error) *mcp.CallToolResult
	// Meta is added to every result's _meta, replacing the upstream's
	// fields of the same names, and Note is added as a first text block to
	// every result with text: so a client sees whose content the result
	// is, while the upstream's own blocks stay as they were. Zero: nothing
	// added. Whatever Meta and Note, hidden characters of the upstream's
	// text are shown as escapes (package untrusted).
	Meta map[string]any
	Note string
	// SyncTimeout bounds a sync started by the upstream's list_changed.
	// Zero: 30 s.
	SyncTimeout time.Duration
	// Logger receives operational logs. Nil: discard.
	Logger *slog.Logger
}

// Relay keeps a server's copy of one Upstream's tools. It is safe for
// concurrent use.
type Relay struct {
	srv  *server.MCPServer
	up   *Upstream
	opts RelayOptions
	log  *slog.Logger

	// syncMu makes syncs run one at a time.
	syncMu sync.Mutex
	// mu guards tools and closed.
	mu     sync.Mutex
	tools  map[string]Tool // by relayed name: what the server has from us
	closed bool
}

// NewRelay returns a Relay of up's tools on srv. Nothing is announced until
// Sync; after that, the upstream's list_changed syncs again by itself.
func NewRelay(srv *server.MCPServer, up *Upstream, opts *RelayOptions) *Relay {
	r := &Relay{srv: srv, up: up, tools: map[string]Tool{}}
	if opts != nil {
		r.opts = *opts
	}
	if r.opts.SyncTimeout <= 0 {
		r.opts.SyncTimeout = 30 * time.Second
	}
	r.log = r.opts.Logger
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	up.OnToolsChanged(r.syncInBackground)
	return r
}

// Upstream is the relayed Upstream.
func (r *Relay) Upstream() *Upstream { return r.up }

// Sync lists the upstream's tools and brings the server's copy in step. A
// name the server already has from elsewhere is left to its owner.
func (r *Relay) Sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	listed, err := r.up.Tools(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	want := map[string]Tool{}
	var add []server.ServerTool
	for _, t := range listed {
		if r.opts.Describe != nil {
			t.Def.Description = r.opts.Describe(t)
		}
		if _, ours := r.tools[t.Name]; !ours && r.srv.GetTool(t.Name) != nil {
			r.log.Warn("mcpproxy: a relayed tool's name is taken; not relayed", "url", r.up.url, "tool", t.Name)
			continue
		}
		want[t.Name] = t
		if old, ok := r.tools[t.Name]; !ok || !sameTool(old, t) {
			add = append(add, server.ServerTool{Tool: t.Def, Handler: r.handler(t)})
		}
	}
	var gone []string
	for name := range r.tools {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	if len(gone) > 0 {
		r.srv.DeleteTools(gone...)
	}
	if len(add) > 0 {
		r.srv.AddTools(add...)
	}
	r.tools = want
	return nil
}

// sameTool reports whether two listings of a tool announce the same.
func sameTool(a, b Tool) bool {
	return a.Upstream == b.Upstream && a.Def.Description == b.Def.Description && reflect.DeepEqual(a.Raw, b.Raw)
}

// syncInBackground is the upstream's list_changed handler.
func (r *Relay) syncInBackground() {
	ctx, cancel := context.WithTimeout(r.up.life, r.opts.SyncTimeout)
	defer cancel()
	if err := r.Sync(ctx); err != nil {
		r.log.Info("mcpproxy: cannot sync the relayed tools", "url", r.up.url, "err", err)
	}
}

// Tools returns the names the Relay has announced, sorted.
func (r *Relay) Tools() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.tools))
	for name := range r.tools {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Close deletes the relayed tools from the server and closes the Upstream.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	names := make([]string, 0, len(r.tools))
	for name := range r.tools {
		names = append(names, name)
	}
	r.tools = map[string]Tool{}
	r.mu.Unlock()
	if len(names) > 0 {
		r.srv.DeleteTools(names...)
	}
	return r.up.Close()
}

// handler relays calls of t. Of the downstream request only the arguments
// and the wish for progress go upstream: not its headers, not its _meta.
func (r *Relay) handler(t Tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.RawArguments
		if len(args) == 0 && req.Params.Arguments != nil {
			var err error
			if args, err = json.Marshal(req.Params.Arguments); err != nil {
				return r.failure(ctx, t, err), nil
			}
		}
		res, err := r.up.Call(ctx, t.Upstream, args, r.progress(ctx, req))
		if err != nil {
			return r.failure(ctx, t, err), nil
		}
		r.mark(res)
		return res, nil
	}
}

// progress relays a call's progress to the client that asked for it, under
// the client's own token (MCP 2025-11-25 "Progress").
func (r *Relay) progress(ctx context.Context, req mcp.CallToolRequest) ProgressFunc {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	tok := req.Params.Meta.ProgressToken
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		srv = r.srv
	}
	var mu sync.Mutex
	last := math.Inf(-1)
	return func(p Progress) {
		// MCP 2025-11-25 "Progress": "The progress value MUST increase with
		// each notification". An upstream may send a call's progress on its
		// POST stream or its GET stream (mcp-go's server splits them), so
		// they can arrive out of order: an older one is dropped.
		mu.Lock()
		defer mu.Unlock()
		if p.Progress <= last {
			return
		}
		last = p.Progress
		params := map[string]any{"progressToken": tok, "progress": p.Progress}
		if p.Total > 0 {
			params["total"] = p.Total
		}
		if p.Message != "" {
			params["message"] = untrusted.Quote(p.Message, 300) // the upstream's words, marked as the Company's
		}
		if err := srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params); err != nil {
			r.log.Debug("mcpproxy: progress not relayed", "err", err)
		}
	}
}

func (r *Relay) failure(ctx context.Context, t Tool, err error) *mcp.CallToolResult {
	if r.opts.Failure != nil {
		return r.opts.Failure(ctx, t, err)
	}
	return mcp.NewToolResultError(err.Error())
}

// A relayed result is marked as the upstream's content: whatever the
// upstream's text hides is shown, and the client sees whose words follow,
// while every content block the upstream sent that hides nothing stays as
// it was, byte for byte.

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
// block unchanged when it hides nothing), and whether it has text. Names
// are matched without case, as Go's JSON decoder (and so a Go client)
// matches them.
func escapeBlock(raw json.RawMessage) (json.RawMessage, bool) {
	var block map[string]json.RawMessage
	if json.Unmarshal(raw, &block) != nil {
		return raw, false
	}
	has, changed := false, false
	for _, k := range fields(block, "type") {
		var typ string
		_ = json.Unmarshal(block[k], &typ)
		switch strings.ToLower(typ) {
		case "text":
			h, c := escapeFields(block, "text")
			has, changed = has || h, changed || c
		case "resource":
			for _, rk := range fields(block, "resource") {
				var res map[string]json.RawMessage
				if json.Unmarshal(block[rk], &res) != nil {
					continue
				}
				h, c := escapeFields(res, "text")
				if c {
					block[rk] = encode(res)
				}
				has, changed = has || h, changed || c
			}
		}
	}
	if !changed {
		return raw, has
	}
	return encode(block), true
}

// fields returns the keys of m that are name, whatever their case.
func fields(m map[string]json.RawMessage, name string) []string {
	var out []string
	for k := range m {
		if strings.EqualFold(k, name) {
			out = append(out, k)
		}
	}
	return out
}

// escapeFields escapes the string fields named name (whatever their case)
// of m in place, and reports whether m has such a field and whether one
// changed.
func escapeFields(m map[string]json.RawMessage, name string) (has, changed bool) {
	for _, k := range fields(m, name) {
		var s string
		if json.Unmarshal(m[k], &s) != nil {
			continue
		}
		has = true
		if esc := untrusted.Escape(s); esc != s {
			m[k], changed = encode(esc), true
		}
	}
	return has, changed
}

// encode writes v as JSON, leaving <, > and & as they are.
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a map of raw messages, or a string: always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
