package main

// This file is serve's --metrics-addr: Prometheus metrics
// (internal/metrics, docs/operations.md) at /metrics on a listener of
// their own, never the public one, in HTTP and stdio mode alike.

import (
	"fmt"
	"net"
	"strconv"
)

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
	if cfg.http.Addr != "" && port != "0" {
		if _, httpPort, err := net.SplitHostPort(cfg.http.Addr); err == nil && httpPort == port {
			return fmt.Errorf("--metrics-addr %s: the metrics need a port of their own, not --http's", cfg.metricsAddr)
		}
	}
	return nil
}
