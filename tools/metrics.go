package tools

// This file labels tool calls for the metrics (internal/metrics): a
// built-in tool by its name, a Company's tool by its kind, since its name
// is the Company's choice and so no bounded label.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// toolLabel is the metrics label of the tool name: itself when it is a
// built-in tool, else the kind of API its prefix names (names.go: a
// Company's tool's name is a domain label, a kind, an empty part, then the
// Company's own name).
func (s *Server) toolLabel(name string) string {
	if s.builtinNames[name] {
		return name
	}
	parts := strings.Split(name, "_")
	for _, p := range parts[min(1, len(parts)):] {
		if kindRule.MatchString(p) {
			if strings.HasPrefix(p, kindAPI) {
				return metrics.ToolAPIOperation
			}
			return metrics.ToolRelay
		}
	}
	return metrics.ToolOther
}

// record records a tool call that began at start and answered res, err
// under ctx.
func (s *Server) record(ctx context.Context, req mcp.CallToolRequest, start time.Time, res *mcp.CallToolResult, err error) {
	outcome := metrics.OutcomeOK
	switch cause := context.Cause(ctx); {
	case cause == errCallDeadline && (err != nil || res == nil || res.IsError):
		outcome = metrics.OutcomeTimeout
	case err != nil && errors.Is(err, context.Canceled):
		outcome = metrics.OutcomeCancelled
	case err != nil || res == nil:
		outcome = metrics.OutcomeFailed
	case res.IsError:
		outcome = metrics.OutcomeToolError
	}
	s.metrics.ToolCall(s.toolLabel(req.Params.Name), outcome, time.Since(start))
}
