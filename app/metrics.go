package app

// This file is --metrics-addr: Prometheus metrics (internal/metrics,
// docs/operations.md) at /metrics on a listener of their own, never the
// public one, in HTTP and stdio mode alike.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// MetricsPath is where the metrics are served.
const MetricsPath = "/metrics"

// ServeMetrics listens on addr (--metrics-addr), makes a Recorder and
// serves it at MetricsPath there until stop is called. Give the Recorder
// to New (Options.Metrics).
func ServeMetrics(addr string, logger *slog.Logger) (rec *metrics.Recorder, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, ListenError("--metrics-addr", addr, err)
	}
	rec = metrics.New()
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, rec.Handler())
	if os.Getenv(DebugMemoryEnv) == "1" {
		debugMemory(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener", "err", err)
		}
	}()
	logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+MetricsPath)
	return rec, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}
