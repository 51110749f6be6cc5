package app

// This file is what running HTTP mode (serve --http) as a service needs: a liveness
// and a readiness endpoint for load balancers and orchestrators
// (docs/operations.md), an ID on every request for its log lines, and a
// graceful drain on SIGTERM.

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
	// HealthPath is the liveness endpoint: the process answers.
	HealthPath = "/healthz"
	// ReadyPath is the readiness endpoint: the process can take work.
	ReadyPath = "/readyz"
	// readyTimeout is how long each readiness check has: the store's ping,
	// the issuer's keys when they must be fetched again.
	readyTimeout = time.Second
	// drainRetryAfter is the Retry-After of a request refused while
	// draining: by then another replica, or this one restarted, answers.
	drainRetryAfter = 5 * time.Second
	// DefaultDrainTimeout is HTTPOptions.DrainTimeout's default: inside the 30 s
	// an orchestrator commonly waits between SIGTERM and SIGKILL.
	DefaultDrainTimeout = 25 * time.Second
)

// readyCheck is one thing /readyz asks: check fails with why, and reason
// is the one line the response gives for it (never a person, a URL or an
// error's text, which go to the log).
type readyCheck struct {
	reason string
	check  func(ctx context.Context) error
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

// healthHandler answers GET /healthz, the liveness probe: 200 "ok"
// whenever the process answers, draining or not, whatever the store and
// the issuer do (those are /readyz's). It needs no credential.
func healthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
}

// readyHandler answers GET /readyz, the readiness probe: 200 "ready" while
// the server is not draining and every check passes within readyTimeout,
// else 503 with one line saying which failed first. It needs no credential
// and says nothing about people: the error is in the log.
func readyHandler(checks []readyCheck, g *gate, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if g.isClosed() {
			w.Header().Set("Retry-After", strconv.Itoa(int(drainRetryAfter/time.Second)))
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("unavailable: draining\n"))
			return
		}
		for _, c := range checks {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			err := c.check(ctx)
			cancel()
			if err != nil {
				logger.WarnContext(r.Context(), "readiness: "+c.reason, "err", err)
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte("unavailable: " + c.reason + "\n"))
				return
			}
		}
		w.Write([]byte("ready\n"))
	})
}

// readyChecks are what /readyz asks of a: the store answers; in hosted
// mode, the authorization server's metadata and keys are current.
func (a *App) readyChecks() []readyCheck {
	checks := []readyCheck{{reason: "the store does not answer", check: a.store.Check}}
	if a.hosted != nil {
		checks = append(checks, readyCheck{reason: "the authorization server's keys are not current", check: a.hosted.resource.Ready})
	}
	return checks
}

// drainer is the tools' side of a drain.
type drainer interface {
	Drain(ctx context.Context) error
}

// drainHTTP shuts srv down gracefully once ctx (SIGINT, SIGTERM) ends: new
// MCP requests get 503 (the gate), the tool calls in flight have until
// bound to finish, then every request still open (streams, long polls) is
// ended by cancelling base, and srv stops. What follows, in App.Close,
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
