package tools

import (
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// HTTPHandler serves MCP over streamable HTTP at /mcp, configured as
// notes/mcp-go.md advises: an event store so 2025-revision clients lose no
// notification, an idle TTL so per-session state cannot leak. Both MCP
// revisions (2025-11-25 with sessions, 2026-07-28 stateless) are served.
// Authentication of the caller is the wrapping middleware's concern.
//
// mcp-go refuses loopback requests whose Host is not localhost (DNS
// rebinding protection); a deployment behind a proxy or on a public address
// turns that off with publicHost and relies on its bearer token instead.
func (s *Server) HTTPHandler(publicHost ...bool) http.Handler {
	return server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithSessionIdleTTL(30*time.Minute),
		server.WithDisableLocalhostProtection(len(publicHost) > 0 && publicHost[0]),
	)
}
