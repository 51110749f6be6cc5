package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"errors"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// companyDemo is srv as an embedded Company: its names reach it past the
// network guard, its CA is trusted, and it publishes the agent's documents.
func companyDemo(srv *poppytest.Server) *Demo {
	return &Demo{
		Guard: &netguard.Options{RootCAs: srv.CertPool(), Resolve: func(hostport string) (string, bool) {
			host, _, err := net.SplitHostPort(hostport)
			return srv.Addr(), err == nil && slices.Contains(srv.Hosts(), host)
		}},
		ClientID: "https://" + srv.AgentHost() + "/agent.json",
		CAPEM:    srv.CAPEM(),
		Publish:  srv.SetAgentDocuments,
	}
}

// stateKey sets POPPY_STATE_KEY to a new key for the test: no keychain is asked.
func stateKey(t *testing.T) {
	b := make([]byte, 32)
	rand.Read(b)
	t.Setenv("POPPY_STATE_KEY", base64.StdEncoding.EncodeToString(b))
}

// callTool calls a tool of a through an in-process MCP client.
func callTool(t *testing.T, a *App, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.NewInProcessClient(a.Tools().MCP())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "app test", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := cl.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestNewOpensASession: New assembles an agent whose tools open a Session
// at a Company with the identity the Company publishes: the state, the
// identity, the network guard and the tools are wired together.
func TestNewOpensASession(t *testing.T) {
	stateKey(t)
	srv := poppytest.NewServer(t, nil)
	a, err := New(context.Background(), Options{Demo: companyDemo(srv)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if res := callTool(t, a, "start_session", map[string]any{"domain": srv.Domain()}); res.IsError {
		t.Fatalf("start_session: %+v", res.Content)
	}
	if n := len(srv.Sessions()); n != 1 {
		t.Errorf("the Company holds %d Sessions, want 1", n)
	}
}

// TestNewWithoutIdentity: with no identity in the state, New still starts,
// and a tool that needs a Session says what to run.
func TestNewWithoutIdentity(t *testing.T) {
	stateKey(t)
	a, err := New(context.Background(), Options{State: State{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !strings.Contains(a.noIdentity, "poppy-mcp init --client-id") {
		t.Errorf("no identity, and nothing says what to run: %q", a.noIdentity)
	}
	if a.identity != nil {
		t.Error("an identity from an empty state")
	}
}

// TestNewRefusesAWrongKey: a state made with another key stops New with a
// StartError saying what to do, and what had started is closed.
func TestNewRefusesAWrongKey(t *testing.T) {
	dir := t.TempDir()
	stateKey(t)
	a, err := New(context.Background(), Options{State: State{Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	stateKey(t)
	_, err = New(context.Background(), Options{State: State{Dir: dir}})
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(se.What, "does not open") || !strings.Contains(se.Todo, "POPPY_STATE_KEY") {
		t.Errorf("a wrong key: %v", err)
	}
}

// TestServeHTTPDrains: over HTTP, /mcp wants the bearer token, /healthz and
// /readyz answer without one, and once ctx ends ServeHTTP drains and
// returns nil.
func TestServeHTTPDrains(t *testing.T) {
	stateKey(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &HTTPOptions{Addr: ln.Addr().String(), Token: "app-test-token-0123456789", DrainTimeout: time.Second}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), Options{State: State{Dir: t.TempDir()}, HTTP: h})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ServeHTTP(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	for path, want := range map[string]int{"/mcp": http.StatusUnauthorized, HealthPath: 200, ReadyPath: 200} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeHTTP after ctx ended: %v", err)
	}
}
