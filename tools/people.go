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
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// people is the MCP server of each person and its streamable HTTP handler.
// It is safe for concurrent use.
type people struct {
	def   *server.MCPServer        // the default user's: Server.mcp
	fresh func() *server.MCPServer // a new server with every built-in tool

	// mu guards servers and handlers. Both are kept for the life of the
	// process: a person's MCP sessions end by their idle TTL.
	mu       sync.Mutex
	servers  map[string]*server.MCPServer            // by local user key, "" excluded
	handlers map[string]*server.StreamableHTTPServer // by local user key: the streamable HTTP server of each person's MCP server
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
		p.handler(user, build).ServeHTTP(w, r)
	})
}
