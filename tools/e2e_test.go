package tools_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// wireRecorder keeps every byte the MCP client received over HTTP (JSON
// responses and SSE streams: results, progress, logs, list_changed).
type wireRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *wireRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &teeBody{rc: resp.Body, w: w}
	return resp, nil
}

func (w *wireRecorder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type teeBody struct {
	rc io.ReadCloser
	w  *wireRecorder
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	t.w.mu.Lock()
	t.w.buf.Write(p[:n])
	t.w.mu.Unlock()
	return n, err
}

func (t *teeBody) Close() error { return t.rc.Close() }

// TestEndToEnd is the whole journey through a real MCP client at both
// revisions: discovery, a Session, device sign-in approved by the Company, a
// conversation that needs the account, an API call, a relayed MCP tool, the
// website join page, and sign-out. Then every byte the client received and
// every log line is scanned for every secret the Company issued or was given.
func TestEndToEnd(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, &poppytest.Options{
				AutoApprove:    &poppytest.AutoApproval{Account: "acct_dana", After: time.Second},
				DeviceInterval: time.Second,
			})
			wire := &wireRecorder{}
			cs := h.connectVia(t, rev, &http.Client{Transport: wire})
			journey(t, h, cs)
			secrets := h.company.IssuedSecrets()
			if len(secrets) < 5 {
				t.Fatalf("the Company recorded only %d secrets: the scan would prove little", len(secrets))
			}
			seen := wire.String() + h.logs.String()
			if !strings.Contains(seen, "Stormline") {
				t.Fatal("the recording misses the results: the scan would prove nothing")
			}
			for _, s := range secrets {
				if len(s) >= 8 && strings.Contains(seen, s) {
					t.Errorf("a secret the Company issued reached the client or the logs: %.10s…", s)
				}
			}
		})
	}
}

// journey runs the scenario's steps and checks each one's outcome.
func journey(t *testing.T, h *harness, cs *sdk.ClientSession) {
	t.Helper()
	const d = "example.com"
	step := func(name string, args map[string]any, want string) map[string]any {
		t.Helper()
		res, got := call(t, cs, name, args)
		text := res.Content[0].(*sdk.TextContent).Text
		if res.IsError || !strings.Contains(text, want) {
			t.Fatalf("%s: isError=%v, text %q lacks %q", name, res.IsError, text, want)
		}
		return got
	}
	step("discover_company", map[string]any{"domain": d}, "speaks Poppy")
	step("start_session", map[string]any{"domain": d}, "signed out")
	conv := step("send_message", map[string]any{"domain": d, "text": "What is the status of order 1042?", "wait_seconds": 10}, "sign_in_device")
	id := conv["conversation_id"].(string)
	step("sign_in_device", map[string]any{"domain": d, "scopes": []string{"poppy:read", "poppy:write"}}, "sign_in_status")
	step("sign_in_status", map[string]any{"domain": d, "wait_seconds": 20}, "complete")
	step("send_message", map[string]any{"domain": d, "conversation_id": id, "text": "Signed in: the status of order 1042, please.", "wait_seconds": 10}, "delivered")
	step("call_api", map[string]any{"domain": d, "operation": "listOrders"}, "Stormline")
	step(relayPrefix+"order_status", map[string]any{"order_id": "ord_1042"}, "")
	step("open_website", map[string]any{"domain": d, "url": "/orders"}, "join_url")
	step("close_conversation", map[string]any{"conversation_id": id}, "closed")
	step("sign_out", map[string]any{"domain": d}, "revoked")
	if n := len(h.company.SignedInSessions()); n != 0 {
		t.Errorf("%d Sessions still signed in after sign_out", n)
	}
}

// connectVia is connect with the client's own HTTP client (to record the wire).
func (h *harness) connectVia(t *testing.T, revision string, hc *http.Client) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url, HTTPClient: hc, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
