package tools

import (
	"context"
	"log/slog"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/poppy-mcp/poppy-mcp/internal/requestid"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// mcpLogHandler sends every record logged with a tool call's context to
// that MCP client as notifications/message, besides the usual log. mcp-go
// applies the client's level: logging/setLevel on 2025-11-25, the
// per-request level on 2026-07-28 (and nothing when the request asked for
// none). Records never carry secrets (docs/architecture.md "Secrets"); the leak tests
// scan what clients receive.
type mcpLogHandler struct {
	next  slog.Handler
	srv   func() *server.MCPServer
	attrs []slog.Attr
}

func (h *mcpLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l) || server.ClientSessionFromContext(ctx) != nil
}

func (h *mcpLogHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	if srv := h.srv(); srv != nil && server.ClientSessionFromContext(ctx) != nil {
		data := map[string]any{"message": r.Message}
		add := func(a slog.Attr) bool { data[a.Key] = a.Value.Resolve().Any(); return true }
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		// Best effort: a client that cannot take notifications still gets its result.
		_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcpLevel(r.Level), "poppy-mcp", data))
	}
	return err
}

func (h *mcpLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &mcpLogHandler{next: h.next.WithAttrs(attrs), srv: h.srv, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *mcpLogHandler) WithGroup(name string) slog.Handler {
	return &mcpLogHandler{next: h.next.WithGroup(name), srv: h.srv, attrs: h.attrs}
}

// detach returns a context for work that outlives the request of ctx
// (device polling): it keeps what names whose work it is, the person
// (mcpauth) and the request ID (requestid), for the log lines, but neither
// the request's cancellation nor its MCP session, so nothing of it is sent
// to a client as the request's own.
func detach(ctx context.Context) context.Context {
	out := context.Background()
	if u, ok := mcpauth.UserFrom(ctx); ok {
		out = mcpauth.WithUser(out, u)
	}
	if id := requestid.From(ctx); id != "" {
		out = requestid.With(out, id)
	}
	return out
}

func mcpLevel(l slog.Level) mcp.LoggingLevel {
	switch {
	case l >= slog.LevelError:
		return mcp.LoggingLevelError
	case l >= slog.LevelWarn:
		return mcp.LoggingLevelWarning
	case l >= slog.LevelInfo:
		return mcp.LoggingLevelInfo
	default:
		return mcp.LoggingLevelDebug
	}
}
