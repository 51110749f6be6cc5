package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

var servingURL = regexp.MustCompile(`url=(http://\S+/mcp)`)

// startHTTP runs `poppy-mcp serve --http ...` with a new state directory
// and returns the MCP URL and the bearer token clients send: the one in
// env's POPPY_HTTP_TOKEN, else the one serve made in the state directory.
func startHTTP(t *testing.T, env []string, args ...string) (string, string, *exec.Cmd) {
	t.Helper()
	state := t.TempDir()
	cmd := exec.Command(binary, append([]string{"serve", "--state-dir", state}, args...)...)
	u := startCmd(t, cmd, env)
	for _, kv := range env {
		if token, ok := strings.CutPrefix(kv, "POPPY_HTTP_TOKEN="); ok {
			return u, token, cmd
		}
	}
	b, err := os.ReadFile(filepath.Join(state, "http-token"))
	if err != nil && !slices.Contains(args, "--no-http-token") {
		t.Fatalf("serve --http made no token file: %v", err)
	}
	return u, strings.TrimSpace(string(b)), cmd
}

// bearer is the Authorization header for token.
func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// headerTransport adds headers to every request, for the go-sdk client.
type headerTransport struct{ headers map[string]string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeHTTP drives `serve --demo --http` with the go-sdk and mcp-go
// clients at both MCP revisions.
func TestServeHTTP(t *testing.T) {
	t.Parallel()
	u, token, _ := startHTTP(t, nil, "--demo", "--http", "127.0.0.1:0")
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("go-sdk/"+rev, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
			hc := &http.Client{Transport: headerTransport{bearer(token)}}
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: hc, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "start_session", Arguments: map[string]any{"domain": demoDomain}})
			if err != nil || res.IsError {
				t.Fatalf("start_session: %v %+v", err, res)
			}
		})
		t.Run("mcp-go/"+rev, func(t *testing.T) {
			mcpGoCall(t, u, rev, bearer(token))
		})
	}
}

// mcpGoCall calls discover_company on the demo Company with the mcp-go client.
func mcpGoCall(t *testing.T, u, rev string, headers map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := transport.NewStreamableHTTP(u, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tr, mcpclient.WithProtocolVersion(rev))
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = rev
	init.Params.ClientInfo = mcp.Implementation{Name: "mcp-go-test", Version: "1"}
	got, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize at %s: %v", rev, err)
	}
	if got.ProtocolVersion != rev {
		t.Fatalf("mcp-go negotiated %s, want %s", got.ProtocolVersion, rev)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "discover_company"
	req.Params.Arguments = map[string]any{"domain": demoDomain}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("discover_company: %v %+v", err, res)
	}
}

// TestServeStdioMCPGo drives the binary over stdio with the mcp-go client.
func TestServeStdioMCPGo(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := mcpclient.NewStdioMCPClientWithOptions(binary, nil, []string{"serve", "--demo", "--state-dir", t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			c2 := mcpclient.NewClient(c.GetTransport(), mcpclient.WithProtocolVersion(rev))
			defer c2.Close()
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = rev
			init.Params.ClientInfo = mcp.Implementation{Name: "mcp-go-test", Version: "1"}
			got, err := c2.Initialize(ctx, init)
			if err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if got.ProtocolVersion != rev {
				t.Fatalf("mcp-go negotiated %s, want %s", got.ProtocolVersion, rev)
			}
			list, err := c2.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil || len(list.Tools) < 2 {
				t.Fatalf("tools/list: %v %d", err, len(list.Tools))
			}
		})
	}
}

func TestServeHTTPToken(t *testing.T) {
	t.Parallel()
	if _, errOut, code := runBinary(t, nil, "serve", "--http", "0.0.0.0:0"); code != 2 || !strings.Contains(errOut, "without a bearer token") {
		t.Fatalf("public bind without token: exit %d %s", code, errOut)
	}
	u, _, _ := startHTTP(t, []string{"POPPY_HTTP_TOKEN=s3cret-token"}, "--demo", "--http", "127.0.0.1:0")
	resp, err := http.Post(u, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	mcpGoCall(t, u, "2025-11-25", map[string]string{"Authorization": "Bearer s3cret-token"})
}

// TestServePublicURL: one deployment is a complete Personal Agent: it serves
// its own agent.json and jwks.json under --public-url.
func TestServePublicURL(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := []string{"POPPY_STATE_KEY=" + strings.Repeat("B", 43)}
	if _, errOut, code := runBinary(t, env, "init", "--state-dir", state, "--out", t.TempDir(), "--client-id", "https://agent.test/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	if _, errOut, code := runBinary(t, env, "serve", "--state-dir", state, "--http", "127.0.0.1:0", "--public-url", "https://agent.test"); code != 2 || !strings.Contains(errOut, "without a bearer token") {
		t.Fatalf("--public-url without a token: exit %d %s", code, errOut)
	}
	if _, errOut, code := runBinary(t, env, "serve", "--state-dir", state, "--public-url", "https://agent.test"); code != 2 || !strings.Contains(errOut, "needs --http") {
		t.Fatalf("--public-url without --http: exit %d %s", code, errOut)
	}
	cmd := exec.Command(binary, "serve", "--state-dir", state, "--http", "127.0.0.1:0", "--http-token", "t0ken",
		"--client-id", "https://agent.test/agent.json", "--public-url", "https://agent.test")
	u := startCmd(t, cmd, env)
	base := strings.TrimSuffix(u, "/mcp")
	// /mcp behind --public-url takes no request without the token, whatever its Host.
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Host = "rebound.attacker.example"
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp without the token behind --public-url: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	for _, p := range []string{"/agent.json", "/jwks.json"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "agent.test") && p == "/agent.json" {
			t.Errorf("%s: %d %s", p, resp.StatusCode, b)
		}
		if strings.Contains(string(b), `"d"`) {
			t.Errorf("%s exposes a private key", p)
		}
	}
}

// TestServeGracefulShutdown: SIGTERM ends the server cleanly with exit 0.
func TestServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	_, _, cmd := startHTTP(t, nil, "--demo", "--http", "127.0.0.1:0")
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
}

// startCmd starts a prepared serve command and returns its MCP URL.
func startCmd(t *testing.T, cmd *exec.Cmd, env []string) string {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := servingURL.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return m[1]
		}
	}
	t.Fatal("poppy-mcp did not start serving HTTP")
	return ""
}
