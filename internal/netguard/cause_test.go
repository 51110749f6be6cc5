package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
)

// TestCause: a refused connection's error is said without the request and
// the dial that wrap it; an error that wraps nothing is itself.
func TestCause(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+"/", nil)
	_, err = http.DefaultClient.Do(req)
	if err == nil {
		t.Skip("something listens on the closed port")
	}
	got := netguard.Cause(err)
	if !errors.Is(got, syscall.ECONNREFUSED) || strings.Contains(got.Error(), addr) {
		t.Errorf("Cause(%v) = %v", err, got)
	}
	plain := errors.New("plain")
	if netguard.Cause(plain) != plain {
		t.Error("an error that wraps nothing is not itself")
	}
}
