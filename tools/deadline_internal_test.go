package tools

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// TestWaitingCallRunsOnItsOwnGoroutine: bound runs the handler of a call
// that waits (wait_seconds) on the call's goroutine, not on one it starts
// (a hosted poppy-mcp holds thousands of waiting calls: BENCHMARKS.md
// "Hosted: people waiting"); a call that does not wait keeps its watchdog.
func TestWaitingCallRunsOnItsOwnGoroutine(t *testing.T) {
	t.Parallel()
	s := New(discovery.New(nil, nil), nil)
	t.Cleanup(s.Close)
	started := func(args map[string]any) bool {
		var stack string
		h := s.bound(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			buf := make([]byte, 64<<10)
			stack = string(buf[:runtime.Stack(buf, false)])
			return mcp.NewToolResultText("ok"), nil
		})
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "read_events", args
		if _, err := h(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		// "created by ...(*Server).bound.2": a goroutine of bound's (inlined
		// into its caller's name).
		return strings.Contains(stack, "(*Server).bound.") && strings.Contains(stack, "created by") &&
			strings.Contains(stack[strings.LastIndex(stack, "created by"):], "(*Server).bound")
	}
	if started(map[string]any{"wait_seconds": 30}) {
		t.Error("a call that waits ran on a goroutine bound started")
	}
	if !started(map[string]any{}) {
		t.Error("a call that does not wait ran without its watchdog goroutine: the test sees no difference")
	}
}
