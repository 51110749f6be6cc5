package tools

// This file bounds how long one tool call may hold poppy-mcp: every call
// has a deadline of its own, the longest wait the tool allows plus a margin
// for the Company requests around it, so a Company that answers slowly, or
// never, ends the call with a clear result instead of holding it (and, over
// stdio, one of the transport's workers) for as long as it likes. It also
// sizes the stdio transport's worker pool for the waits poppy-mcp allows.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

const (
	// defaultCallTimeout bounds a call that does not wait for the user or
	// the Company Agent: the MCP clients' own request timeout is about a
	// minute. It covers the default waits of tools that wait without being
	// asked to (send_message's 20 s) with waitMargin to spare.
	defaultCallTimeout = 60 * time.Second
	// waitMargin is how long a call that waits may take beyond its wait:
	// the requests before and after it (each bounded at 30 s by auth and
	// conversation).
	waitMargin = 30 * time.Second
	// longestWait is the longest wait_seconds any tool honours.
	longestWait = max(maxWait, convMaxWait)
	// deadlineGrace is how long a call past its deadline has to return
	// its own result (most see their context end and phrase what they
	// have) before poppy-mcp answers for it.
	deadlineGrace = 2 * time.Second
)

// Over stdio, mcp-go runs tool calls on a fixed pool of workers (5 by
// default), and a call holds its worker until it returns: five waiting
// read_events calls would stall every other tool for their whole wait.
// Each call holds a worker for at most longestWait+waitMargin (90 s); with
// 100 workers, mcp-go's maximum, a model would need 100 calls in flight at
// once to make a quick tool wait, and then only until the first deadline.
const (
	stdioWorkers = 100
	stdioQueue   = 1000 // beyond it mcp-go handles calls on its read loop, one at a time
)

// errCallDeadline is the cause of a call's context ending at its deadline.
var errCallDeadline = errors.New("tools: the tool call's deadline passed")

// errDraining is the cause of a waiting call's context ending because
// poppy-mcp is shutting down (Drain): it stops waiting and answers with
// what it has.
var errDraining = errors.New("tools: poppy-mcp is shutting down")

// ServeStdio serves MCP over in and out, newline-delimited JSON-RPC as MCP's
// stdio transport says, until ctx ends or in is closed, with the worker pool
// sized for the waits poppy-mcp allows. errLog receives the transport's own
// errors. mcp-go keeps one stdio session per process: serve one at a time.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, errLog *log.Logger) error {
	stdio := server.NewStdioServer(s.mcp)
	stdio.SetErrorLogger(errLog)
	server.WithWorkerPoolSize(stdioWorkers)(stdio)
	server.WithQueueSize(stdioQueue)(stdio)
	return stdio.Listen(ctx, in, out)
}

// callLimit is how long req may run: the call timeout, or the wait it asks
// for (at most longestWait) plus waitMargin when that is longer. waits
// reports whether req asks to wait.
func (s *Server) callLimit(req mcp.CallToolRequest) (limit time.Duration, waits bool) {
	limit = s.callTimeout
	if limit <= 0 {
		limit = defaultCallTimeout
	}
	var args struct {
		WaitSeconds *integer `json:"wait_seconds"`
	}
	if req.BindArguments(&args) == nil {
		if wait := args.WaitSeconds.duration(0, longestWait); wait > 0 {
			return max(limit, wait+waitMargin), true
		}
	}
	return limit, false
}

// answer is what a tool handler returned.
type answer struct {
	res *mcp.CallToolResult
	err error
}

// bound is the tool handler middleware that gives each call its deadline.
// The handler runs with a context that ends at the deadline; one that has
// not returned shortly after gets a result that says so, and finishes in the
// background (whatever it returns then is dropped).
func (s *Server) bound(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		if !s.calls.begin() {
			s.metrics.ToolCall(s.toolLabel(req.Params.Name), metrics.OutcomeDraining, 0)
			return draining(), nil
		}
		defer s.calls.end()
		start := time.Now()
		limit, waits := s.callLimit(req)
		ctx, cancel := context.WithTimeoutCause(ctx, limit, errCallDeadline)
		defer cancel()
		defer func() { s.record(ctx, req, start, res, err) }()
		if waits { // a shutdown ends the wait, not the call (Drain)
			var stop context.CancelCauseFunc
			ctx, stop = context.WithCancelCause(ctx)
			defer s.calls.waiting(stop)()
			defer s.metrics.Waiting()()
		}
		if waits { // on this goroutine: see inline
			return s.inline(ctx, req, limit, next)
		}
		done := make(chan answer, 1)
		go func() { done <- runTool(ctx, next, req) }()
		select {
		case a := <-done:
			return s.settle(ctx, req, limit, a)
		case <-ctx.Done():
		}
		if cause := context.Cause(ctx); cause != errCallDeadline && cause != errDraining {
			return nil, ctx.Err() // the client cancelled the call
		}
		grace := time.NewTimer(deadlineGrace)
		defer grace.Stop()
		select {
		case a := <-done:
			return s.settle(ctx, req, limit, a)
		case <-grace.C:
			return s.cutShort(ctx, req, limit), nil
		}
	}
}

// inline runs the handler of a call that waits (wait_seconds) on the
// call's own goroutine, not one of its own: a hosted poppy-mcp holds
// thousands of waiting calls, and a second goroutine each, with the deep
// stack of the handler, was a tenth of what a waiting person cost
// (BENCHMARKS.md "Hosted: people waiting"). The handlers that wait (the
// conversation tools, sign_in_status) end their waits and their Company
// requests with their context, so the deadline ends them without a
// watchdog; a call the client cancels still ends as cancelled.
func (s *Server) inline(ctx context.Context, req mcp.CallToolRequest, limit time.Duration, next server.ToolHandlerFunc) (*mcp.CallToolResult, error) {
	a := runTool(ctx, next, req)
	if cause := context.Cause(ctx); ctx.Err() != nil && cause != errCallDeadline && cause != errDraining {
		return nil, ctx.Err() // the client cancelled the call
	}
	return s.settle(ctx, req, limit, a)
}

// settle passes a handler's answer on, except that a failure once the
// deadline has passed (most likely its cause: a request cut short) becomes
// a result that says what happened. A success past the deadline stands.
func (s *Server) settle(ctx context.Context, req mcp.CallToolRequest, limit time.Duration, a answer) (*mcp.CallToolResult, error) {
	cause := context.Cause(ctx)
	if (cause == errCallDeadline || cause == errDraining) && (a.err != nil || a.res == nil || a.res.IsError) {
		return s.cutShort(ctx, req, limit), nil
	}
	return a.res, a.err
}

// cutShort is the result of a call whose context ended before it could
// answer: at its deadline, or when a shutdown ended its wait.
func (s *Server) cutShort(ctx context.Context, req mcp.CallToolRequest, limit time.Duration) *mcp.CallToolResult {
	if context.Cause(ctx) == errDraining {
		return stoppedWaiting()
	}
	return s.timedOut(ctx, req, limit)
}

// runTool runs a handler, turning a panic into an error: it may run on a
// goroutine of its own, out of reach of mcp-go's recovery middleware.
func runTool(ctx context.Context, h server.ToolHandlerFunc, req mcp.CallToolRequest) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = answer{err: fmt.Errorf("tools: panic in the %s tool: %v", req.Params.Name, r)}
		}
	}()
	res, err := h(ctx, req)
	return answer{res, err}
}

// timedOut is the result of a call that ran past its deadline.
func (s *Server) timedOut(ctx context.Context, req mcp.CallToolRequest, limit time.Duration) *mcp.CallToolResult {
	secs := int(limit / time.Second)
	s.log.WarnContext(ctx, "tool call ran past its deadline", "tool", req.Params.Name, "seconds", secs)
	next := "Try again later; if it keeps happening, the Company is too slow to answer: tell the user."
	return failure(map[string]any{"error": "timeout", "seconds": secs, "next": next},
		"%s did not finish within %d s: the Company (or the network to it) did not answer in time. %s", req.Params.Name, secs, next)
}

// calls counts the tool calls running, so that Drain can wait for them. It
// is safe for concurrent use.
type calls struct {
	running sync.WaitGroup
	// mu is held while a call begins and while draining is set, so no call
	// begins once Drain has begun waiting. It guards waits too.
	mu       sync.Mutex
	draining bool
	// waits ends the waits of the calls that wait, by call; stopped says
	// a drain has ended them.
	waits   waitSet
	stopped bool
}

// waitSet are the waits of the calls that wait, each by its stop function.
type waitSet map[*context.CancelCauseFunc]struct{}

// waiting registers stop, which ends a waiting call's wait, until the
// returned function is called; once a drain has ended the waits, it calls
// stop at once.
func (c *calls) waiting(stop context.CancelCauseFunc) (done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		stop(errDraining)
		return func() {}
	}
	if c.waits == nil {
		c.waits = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &stop
	c.waits[key] = struct{}{}
	return func() {
		c.mu.Lock()
		delete(c.waits, key)
		c.mu.Unlock()
	}
}

// begin counts a call in; it reports false, counting nothing, once the
// Server is draining.
func (c *calls) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return false
	}
	c.running.Add(1)
	return true
}

func (c *calls) end() { c.running.Done() }

// drain refuses calls from now on and waits for those running, until ctx
// ends. Calls that wait (wait_seconds) may wait on until shortly before
// ctx's deadline, leaving them stopWaitsMargin to answer with what they
// have instead of being cut off.
func (c *calls) drain(ctx context.Context) error {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	idle := make(chan struct{})
	go func() {
		c.running.Wait()
		close(idle)
	}()
	var stopWaits <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl) - stopWaitsMargin)
		defer t.Stop()
		stopWaits = t.C
	}
	for {
		select {
		case <-idle:
			return nil
		case <-stopWaits:
			c.stopWaits()
			stopWaits = nil
		case <-ctx.Done():
			return fmt.Errorf("tools: calls still running when the drain ended: %w", context.Cause(ctx))
		}
	}
}

// stopWaitsMargin is how long before a drain's end the waits are ended:
// a call's grace to answer, and time to send the answer.
const stopWaitsMargin = deadlineGrace + 3*time.Second

// stopWaits ends the wait of every call that waits: each answers now with
// what it has.
func (c *calls) stopWaits() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for stop := range c.waits {
		(*stop)(errDraining)
	}
}

// Drain stops taking tool calls (each new one is answered that poppy-mcp is
// shutting down, to call again) and waits for the calls running to finish,
// until ctx ends: the first step of a graceful shutdown. A call that waits
// (wait_seconds) is told to stop waiting shortly before ctx's deadline, so
// that it answers with what it has rather than being cut off. Close follows.
func (s *Server) Drain(ctx context.Context) error { return s.calls.drain(ctx) }

// stoppedWaiting is the result of a call whose wait a shutdown ended
// before it had anything to say.
func stoppedWaiting() *mcp.CallToolResult {
	return failure(map[string]string{"error": "shutting_down", "next": "Call the tool again in a few seconds."},
		"poppy-mcp is shutting down, so it stopped waiting. Nothing was lost: events are read from where the last read ended, "+
			"and a message the Company did not confirm is sent again with its ID. Call the tool again in a few seconds.")
}

// draining is the result of a call made while poppy-mcp shuts down.
func draining() *mcp.CallToolResult {
	return failure(map[string]string{"error": "shutting_down", "next": "Call the tool again in a few seconds."},
		"poppy-mcp is shutting down and takes no new calls. Call the tool again in a few seconds: another instance, or this one restarted, will answer.")
}
