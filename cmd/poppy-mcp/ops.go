package main

// This file is what running serve --http as a service needs: a health
// endpoint for load balancers and orchestrators, an ID on every request
// for its log lines, and a graceful drain on SIGTERM.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/requestid"
)

const (
	// HealthPath is the health endpoint.
	healthPath = "/healthz"
	// healthTimeout is how long the store has to answer a health check.
	healthTimeout = time.Second
	// drainRetryAfter is the Retry-After of a request refused while
	// draining: by then another replica, or this one restarted, answers.
	drainRetryAfter = 5 * time.Second
	// defaultDrainTimeout is --drain-timeout's default: inside the 30 s
	// an orchestrator commonly waits between SIGTERM and SIGKILL.
	defaultDrainTimeout = 25 * time.Second
)

// checker is what the health endpoint asks: the store.
type checker interface {
	Check(ctx context.Context) error
}

// gate turns work away once draining begins. It is safe for concurrent use.
type gate struct {
	// mu guards closed.
	mu     sync.Mutex
	closed bool
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

func (g *gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// guard answers 503 with Retry-After once the gate is closed, and lets the
// request through before.
func (g *gate) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.isClosed() {
			w.Header().Set("Retry-After", strconv.Itoa(int(drainRetryAfter/time.Second)))
			w.Header().Set("Connection", "close")
			http.Error(w, "poppy-mcp is shutting down: try again", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// healthHandler answers GET /healthz: 200 when the store answers a trivial
// query within healthTimeout and the server is not draining, else 503. It
// needs no credential and says nothing more than "ok" or "unavailable":
// why is in the log.
func healthHandler(st checker, g *gate, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if g.isClosed() {
			w.Header().Set("Retry-After", strconv.Itoa(int(drainRetryAfter/time.Second)))
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("unavailable\n"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := st.Check(ctx); err != nil {
			logger.WarnContext(r.Context(), "health check: the store does not answer", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("unavailable\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
}

// drainer is the tools' side of a drain.
type drainer interface {
	Drain(ctx context.Context) error
}

// drainHTTP shuts srv down gracefully once ctx (SIGINT, SIGTERM) ends: new
// MCP requests get 503 (the gate), the tool calls in flight have until
// bound to finish, then every request still open (streams, long polls) is
// ended by cancelling base, and srv stops. What follows, in runServe,
// stops background work and closes the store.
func drainHTTP(srv *http.Server, g *gate, tools drainer, cancelBase context.CancelFunc, bound time.Duration, logger *slog.Logger) error {
	g.close()
	logger.Info("draining: new MCP requests get 503; waiting for the tool calls in flight", "bound", bound.String())
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := tools.Drain(ctx); err != nil {
		logger.Warn("draining: tool calls still running at the bound are ended", "err", err)
	}
	cancelBase()
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	err := srv.Shutdown(shutdown)
	if errors.Is(err, context.DeadlineExceeded) {
		return srv.Close()
	}
	return err
}

// withRequestID gives every request an ID (requestid) for its log lines.
func withRequestID(next http.Handler) http.Handler { return requestid.Middleware(next) }
