package poppytest

// This file is the Company's MCP server (Poppy 0.1 §6) at
// https://mcp.<domain>/mcp: an mcp-go streamable HTTP server behind
// Authenticate, so it takes only Bearer Session Tokens issued for its url
// (§4.3, §6), and enforces the scopes of the tools that need one with the
// Bearer errors of RFC 6750 §3.1 (the MCP authorization spec's scope
// challenge). Its RFC 9728 metadata is served by documents.go. The tools are
// in mcpserver_tools.go.
//
// Knobs: MCPAddTool and MCPRemoveTool change the tool list at run time (the
// server sends notifications/tools/list_changed), RestartMCP forgets every
// MCP session as a restarted server does (requests on an old session get
// 404, and open streams end).

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// maxMCPBody bounds the JSON-RPC body the scope check reads.
const maxMCPBody = 1 << 20

// mcpState is the Server's concern of its MCP server (Poppy 0.1 §6): the
// server, its tools and the knobs that change them.
type mcpState struct {
	*Server
	// mu guards every field below. In mcpState's methods, s.mu is this
	// lock; s.Server.mu is the Server's.
	mu       sync.Mutex
	http     *server.StreamableHTTPServer // the running server; replaced by RestartMCP
	mcp      *server.MCPServer            // the tools behind http
	extra    map[string]string            // MCPAddTool name -> description
	order    []string                     // extra tool names, in order added
	restarts int
}

// callerKey carries the authenticated *Caller into the MCP tool handlers.
type callerKey struct{}

// mcpURL is the url of the default MCP server, as poppy.json lists it.
func (s *mcpState) mcpURL() string { return s.URL("mcp."+s.domain, mcpPath) }

// installMCPServer serves the MCP server at mcp.<domain>/mcp.
func (s *mcpState) installMCPServer() {
	s.extra = map[string]string{}
	s.http, s.mcp = s.newMCPServer()
	s.Handle("mcp."+s.domain, mcpPath, s.MCPHandler(s.mcpURL()))
}

// newMCPServer builds an MCP server with the default tools and those added
// by MCPAddTool; the caller holds s.mu or owns s.
func (s *mcpState) newMCPServer() (*server.StreamableHTTPServer, *server.MCPServer) {
	tools := s.mcpTools()
	if s.opts.MCPTools != nil {
		tools = cannedTools(s.opts.MCPTools)
	}
	for _, name := range s.order {
		t, h := echoTool(name, s.extra[name])
		tools = append(tools, server.ServerTool{Tool: t, Handler: h})
	}
	return s.buildMCPServer(tools)
}

// buildMCPServer builds an MCP server with tools, paginated by
// Options.MCPPageSize, served over streamable HTTP at mcpPath.
func (s *mcpState) buildMCPServer(tools []server.ServerTool) (*server.StreamableHTTPServer, *server.MCPServer) {
	pageSize := s.opts.MCPPageSize
	if pageSize <= 0 {
		pageSize = 2
	}
	m := server.NewMCPServer("poppytest-mcp", "0.1",
		server.WithToolCapabilities(true),
		server.WithPaginationLimit(pageSize),
		server.WithRecovery(),
	)
	m.AddTools(tools...)
	h := server.NewStreamableHTTPServer(m,
		server.WithEndpointPath(mcpPath),
		server.WithStateful(true),                             // sessions a restart forgets, as a real server's
		server.WithEventStore(server.NewInMemoryEventStore()), // docs/mcp-go.md: no lost progress
		server.WithDisableLocalhostProtection(true),           // every host of the Server is on loopback
		server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler)),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, callerKey{}, r.Context().Value(callerKey{}))
		}),
	)
	return h, m
}

// MCPHandler returns the MCP server as an http.Handler for the MCP API whose
// url is resource: it takes only Bearer Session Tokens issued for resource.
// The default server is already mounted at mcp.<domain>/mcp; a test that
// wants a second MCP API mounts another with Handle, lists it in poppy.json
// (Options.PoppyJSON) and serves its RFC 9728 metadata (SetDocument). Every
// handler shares one set of tools.
func (s *mcpState) MCPHandler(resource string) http.Handler {
	return s.mcpHandler(resource, func() http.Handler {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.http
	})
}

// mcpHandler serves the MCP server that current returns behind
// Authenticate for resource and the scope check of tools/call.
func (s *mcpState) mcpHandler(resource string, current func() http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Poppy 0.1 §6: "It MUST accept only tokens issued for its url (4.3)."
		c, ok := s.Authenticate(w, r, resource)
		if !ok {
			return
		}
		if r.Method == http.MethodPost && !s.mcpScopesOK(w, r, c) {
			return
		}
		current().ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// mcpScopesOK checks the scopes of a tools/call. Poppy 0.1 §6: a listed MCP
// server "MUST accept Session Tokens as its access tokens and enforce their
// scopes": a signed-out caller gets sign_in_required, a token without the
// scope insufficient_scope naming it (RequireScopes). The body is put back.
func (s *mcpState) mcpScopesOK(w http.ResponseWriter, r *http.Request, c *Caller) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMCPBody))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil {
		return true // the MCP server answers the broken request itself
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return true
	}
	scopes := s.toolScopes(msg.Params.Name)
	return len(scopes) == 0 || s.RequireScopes(w, c, scopes...)
}

// MCPAddTool adds a tool to the MCP server that echoes its "text" argument,
// or replaces the one added before with the same name. Connected clients
// are sent notifications/tools/list_changed.
func (s *mcpState) MCPAddTool(name, description string) {
	st := s
	st.mu.Lock()
	if _, ok := st.extra[name]; !ok {
		st.order = append(st.order, name)
	}
	st.extra[name] = description
	m := st.mcp
	st.mu.Unlock()
	m.AddTool(echoTool(name, description)) // sends list_changed to every session
}

// MCPRemoveTool removes a tool added by MCPAddTool; connected clients are
// sent notifications/tools/list_changed. It reports whether it was there.
func (s *mcpState) MCPRemoveTool(name string) bool {
	st := s
	st.mu.Lock()
	_, ok := st.extra[name]
	if ok {
		delete(st.extra, name)
		for i, n := range st.order {
			if n == name {
				st.order = append(st.order[:i], st.order[i+1:]...)
				break
			}
		}
	}
	m := st.mcp
	st.mu.Unlock()
	if ok {
		m.DeleteTools(name)
	}
	return ok
}

// RestartMCP replaces the MCP server with a new one, as a restart does: it
// knows none of the old MCP sessions (requests on one get 404 Not Found,
// MCP 2025-11-25 "Session Management"), and the old server's open streams
// end. Tools added by MCPAddTool are kept.
func (s *mcpState) RestartMCP() {
	st := s
	st.mu.Lock()
	old := st.http
	st.http, st.mcp = s.newMCPServer()
	st.restarts++
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = old.Shutdown(ctx)
}

// MCPRestarts is how many times RestartMCP has run.
func (s *mcpState) MCPRestarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}
