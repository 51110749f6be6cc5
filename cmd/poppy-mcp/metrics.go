package main

// This file is serve's --metrics-addr: Prometheus metrics
// (internal/metrics, docs/operations.md) at /metrics on a listener of
// their own, never the public one, in HTTP and stdio mode alike.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// metricsPath is where the metrics are served.
const metricsPath = "/metrics"

// checkMetricsAddr checks --metrics-addr: a bare port binds loopback, and
// it is never --http's address (the metrics need no token: they must not
// be where MCP is).
func (cfg *serveConfig) checkMetricsAddr() error {
	if cfg.metricsAddr == "" {
		return nil
	}
	if _, err := strconv.ParseUint(cfg.metricsAddr, 10, 16); err == nil {
		cfg.metricsAddr = "127.0.0.1:" + cfg.metricsAddr
	}
	_, port, err := net.SplitHostPort(cfg.metricsAddr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: want HOST:PORT, like 127.0.0.1:9808", cfg.metricsAddr)
	}
	if cfg.http.addr != "" && port != "0" {
		if _, httpPort, err := net.SplitHostPort(cfg.http.addr); err == nil && httpPort == port {
			return fmt.Errorf("--metrics-addr %s: the metrics need a port of their own, not --http's", cfg.metricsAddr)
		}
	}
	return nil
}

// serveMetrics listens on --metrics-addr, makes cfg's Recorder and serves
// it there until stop is called.
func serveMetrics(cfg *serveConfig, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", cfg.metricsAddr)
	if err != nil {
		return nil, listenError("--metrics-addr", cfg.metricsAddr, err)
	}
	cfg.metrics = metrics.New()
	mux := http.NewServeMux()
	mux.Handle("GET "+metricsPath, cfg.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener", "err", err)
		}
	}()
	logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+metricsPath)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}
