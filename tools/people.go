package tools

// This file keeps the people of a hosted poppy-mcp apart at the MCP layer.
// Each person (a local user, mcpauth.KeyFrom of the request) is served by an
// MCP server of their own: the built-in tools, plus the tools of the
// Companies that person has a Session with (API operations, relayed MCP
// tools). mcp-go sends notifications/tools/list_changed to every session of
// the server whose tools change (docs/mcp-go.md), so with a server per
// person a Company tool announced for one person reaches only that
// person's MCP sessions, at both revisions, and no person can list or call
// a tool of another's Company: the server that would hold it is not theirs.
// Progress, log and elicitation messages go to the session of the request
// they belong to (the request's context), whichever server it is.
//
// The default user "" (stdio, loopback HTTP: one person) is served by the
// Server's own MCP server, exactly as before people were kept apart.

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// people is the MCP server of each person and its streamable HTTP handler.
// It is safe for concurrent use.
type people struct {
	def   *server.MCPServer        // the default user's: Server.mcp
	fresh func() *server.MCPServer // a new server with every built-in tool

	// restore brings back, for the person ctx acts for, the Companies they
	// use (Server.restorePerson); spawn runs it on the Server's background.
	restore func(ctx context.Context)
	spawn   func(f func(context.Context)) bool

	// mu guards servers, handlers and restored. All are kept for the life
	// of the process: a person's MCP sessions end by their idle TTL.
	mu       sync.Mutex
	servers  map[string]*server.MCPServer            // by local user key, "" excluded
	handlers map[string]*server.StreamableHTTPServer // by local user key: the streamable HTTP server of each person's MCP server
	restored map[string]chan struct{}                // by local user key: closed once the person's Companies are back
}

// restoreWait bounds how long a person's first requests to this process
// wait for their Companies to come back (restore): the discovery and
// Session start of each, usually well under a second.
const restoreWait = 15 * time.Second

// ready brings back, once per person and process, the Companies the person
// already uses, so that this replica lists and serves the tools of those
// Companies from the person's first request, whichever replica (or earlier
// run) they used before; their requests wait for it, up to restoreWait.
func (p *people) ready(ctx context.Context, user string) {
	p.mu.Lock()
	done, begun := p.restored[user]
	if !begun {
		done = make(chan struct{})
		p.restored[user] = done
	}
	p.mu.Unlock()
	if !begun {
		person := detach(ctx) // the person (and request ID) for its log lines, not the request's end
		if !p.spawn(func(bg context.Context) {
			defer close(done)
			ctx, cancel := context.WithTimeout(person, restoreWait)
			defer cancel()
			stop := context.AfterFunc(bg, cancel) // Close stops it
			defer stop()
			p.restore(ctx)
		}) {
			close(done) // shutting down
		}
	}
	select {
	case <-done: // every request after the first few
		return
	default:
	}
	wait := time.NewTimer(restoreWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-wait.C:
	}
}

// newHandler makes the streamable HTTP server of an MCP server.
type newHandler func(*server.MCPServer) *server.StreamableHTTPServer

// server returns the MCP server of the local user, making it on first use.
func (p *people) server(user string) *server.MCPServer {
	if user == "" {
		return p.def
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serverLocked(user)
}

// serverLocked is server for a person; p.mu is held.
func (p *people) serverLocked(user string) *server.MCPServer {
	srv := p.servers[user]
	if srv == nil {
		srv = p.fresh()
		p.servers[user] = srv
	}
	return srv
}

// handler returns the HTTP handler of the local user's MCP server, making
// it with build on first use. A person's MCP sessions (2025-11-25)
// live in their handler alone.
func (p *people) handler(user string, build newHandler) http.Handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.handlers[user]
	if h == nil {
		h = build(p.serverLocked(user))
		p.handlers[user] = h
	}
	return h
}

// route serves each request with the handler of its person: the default
// user's MCP server for "", the person's own for anyone else.
func (p *people) route(build newHandler) http.Handler {
	def := build(p.def)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := mcpauth.KeyFrom(r.Context())
		if user == "" {
			def.ServeHTTP(w, r)
			return
		}
		p.ready(r.Context(), user)
		p.handler(user, build).ServeHTTP(w, r)
	})
}
