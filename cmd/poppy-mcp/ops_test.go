package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// getWith GETs u with headers and returns the response, its body read.
func getWith(t *testing.T, u string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestHealthAndRequestIDs: GET /healthz answers 200 "ok" and GET /readyz
// 200 "ready" without a credential while the store answers; every response carries an
// X-Request-Id, the caller's when well-formed; and the lines logged while
// handling a request carry its ID.
func TestHealthAndRequestIDs(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	env := append(p.env, "POPPY_HTTP_TOKEN=ops-test-token-0123456789")
	u, logged := startLogged(t, env, append([]string{"serve", "--http", "127.0.0.1:0", "--log-level", "debug"}, p.flags...)...)
	health := strings.TrimSuffix(u, "/mcp") + "/healthz"
	resp, body := getWith(t, health, map[string]string{"X-Request-Id": "lb-probe-7"})
	if resp.StatusCode != 200 || body != "ok\n" || resp.Header.Get("X-Request-Id") != "lb-probe-7" {
		t.Fatalf("healthz: %d %q, X-Request-Id %q", resp.StatusCode, body, resp.Header.Get("X-Request-Id"))
	}
	if resp, body := getWith(t, strings.TrimSuffix(u, "/mcp")+"/readyz", nil); resp.StatusCode != 200 || body != "ready\n" {
		t.Fatalf("readyz: %d %q", resp.StatusCode, body)
	}
	resp, _ = getWith(t, health, map[string]string{"X-Request-Id": "forged\" level=ERROR"})
	if id := resp.Header.Get("X-Request-Id"); id == "" || strings.ContainsAny(id, "\" =") {
		t.Errorf("a malformed X-Request-Id came back as %q", id)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	hc := &http.Client{Transport: headerTransport{map[string]string{
		"Authorization": "Bearer ops-test-token-0123456789", "X-Request-Id": "req-discover-1"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, text := call(t, cs, "start_session", map[string]any{"domain": "example.com"}); res.IsError {
		t.Fatalf("start_session: %s", text)
	}
	if !strings.Contains(logged.String(), "request_id=req-discover-1") {
		t.Errorf("no line logged while serving the call carries its request ID:\n%s", logged.String())
	}
}

// TestDrainOnSIGTERM: on SIGTERM, serve stops taking work (/readyz and new
// MCP requests answer 503 with Retry-After; /healthz, liveness, stays 200) while the tool call in flight
// (a send_message waiting for the Company Agent's reply) finishes with its
// result; then it exits 0, having stopped background work and closed the
// store.
func TestDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	p := newPerson(t, &poppytest.Options{AgentDelay: 3 * time.Second})
	env := append(p.env, "POPPY_HTTP_TOKEN=ops-test-token-0123456789")
	cmd, u, logged := startProcess(t, env, append([]string{"serve", "--http", "127.0.0.1:0", "--drain-timeout", "60s"}, p.flags...)...)
	auth := map[string]string{"Authorization": "Bearer ops-test-token-0123456789"}
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: &http.Client{Transport: headerTransport{auth}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type outcome struct {
		res  *sdk.CallToolResult
		text string
	}
	done := make(chan outcome, 1)
	go func() {
		res, text := call(t, cs, "send_message", map[string]any{"domain": "example.com", "text": "Where is order 1042?", "wait_seconds": 30})
		done <- outcome{res, text}
	}()
	waitFor(t, 30*time.Second, "the message at the Company", func() bool { return len(p.srv.Conversations()) == 1 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ready := strings.TrimSuffix(u, "/mcp") + "/readyz"
	waitFor(t, 30*time.Second, "readyz to answer 503", func() bool { resp, _ := getWith(t, ready, nil); return resp.StatusCode == 503 })
	if resp, body := getWith(t, ready, nil); resp.Header.Get("Retry-After") == "" || body != "unavailable: draining\n" {
		t.Errorf("readyz while draining: %d %q, Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if resp, body := getWith(t, strings.TrimSuffix(u, "/mcp")+"/healthz", nil); resp.StatusCode != 200 {
		t.Errorf("healthz while draining: %d %q, want 200: the process answers", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(initialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", auth["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a new MCP request while draining: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	got := <-done
	if got.res.IsError || !strings.Contains(got.text, "company_agent") { // the Company Agent's reply, 3 s later
		t.Errorf("the call in flight did not finish with its result: %s", got.text)
	}
	state, err := cmd.Process.Wait()
	if err != nil || state.ExitCode() != 0 {
		t.Errorf("exit: %v %v\n%s", state, err, logged.String())
	}
	if !strings.Contains(logged.String(), "drained") {
		t.Errorf("the drain was not logged:\n%s", logged.String())
	}
}
