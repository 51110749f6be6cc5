package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// alternate is a load balancer without stickiness, in the client: each
// POST goes to the next replica in turn (the test may say which is next),
// each GET likewise on a turn of its own; it sends the person's token and
// records which replica served what.
type alternate struct {
	urls  []string // the replicas' MCP URLs
	token string

	mu     sync.Mutex
	post   int      // the replica of the next POST, counted on
	get    int      // the replica of the next GET or DELETE
	served []served // guarded by mu
}

// served is one request as the replica answered it.
type served struct {
	replica int
	method  string // the HTTP method and, for a POST, the JSON-RPC method ("answer" for a response)
	tool    string // the tool, for a tools/call
	status  int
	session bool // the response carried an Mcp-Session-Id
	body    *bytes.Buffer
}

// next makes the next POST go to replica i.
func (a *alternate) next(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.post = i
}

func (a *alternate) RoundTrip(req *http.Request) (*http.Response, error) {
	s, body := classify(req)
	a.mu.Lock()
	turn := &a.get
	if req.Method == http.MethodPost {
		turn = &a.post
	}
	s.replica = *turn % len(a.urls)
	*turn++
	a.mu.Unlock()
	out := req.Clone(req.Context())
	out.URL, _ = url.Parse(a.urls[s.replica])
	out.Host = out.URL.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	s.status, s.session = resp.StatusCode, resp.Header.Get("Mcp-Session-Id") != ""
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, syncWriter{&a.mu, s.body}), resp.Body}
	a.mu.Lock()
	a.served = append(a.served, s)
	a.mu.Unlock()
	return resp, nil
}

// classify reads req's body and says what it is.
func classify(req *http.Request) (served, []byte) {
	s := served{method: req.Method, body: &bytes.Buffer{}}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && req.Method == http.MethodPost {
		s.method, s.tool = cmp.Or(msg.Method, "answer"), msg.Params.Name
	}
	return s, body
}

// syncWriter writes to w under mu.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// requests returns what was served so far, with each response's body.
func (a *alternate) requests() []served {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Clone(a.served)
	for i := range out {
		out[i].body = bytes.NewBuffer(slices.Clone(out[i].body.Bytes()))
	}
	return out
}

// TestHostedMCPSessionAcrossReplicas: two replicas on one PostgreSQL
// database, and the go-sdk client behind a load balancer without
// stickiness (alternate): at 2025-11-25 the session initialized on A is
// served by B as the client declared it — tools/list, discover_company and
// start_session on B and back on A; sign_in_device on B offers the
// verification page by URL elicitation (B knows the client takes it), and
// the client's answer, sent to A, reaches B's waiting call; the log level
// set on A holds on B (B sends log notifications). Another person's token
// is refused in the session on both replicas; after the client ends the
// session (DELETE) on one replica, the other refuses it with 404 and a
// JSON-RPC error that says so. At 2026-07-28 the same calls alternate
// between the replicas without any session ID.
func TestHostedMCPSessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	h := startHostedWith(t, &deploymentOptions{Replicas: 2, Store: postgresURL(t)})
	urls := []string{h.replicas[0].mcpURL, h.replicas[1].mcpURL}
	for _, c := range []struct{ person, account, rev string }{
		{"dana", "acct_dana", "2025-11-25"},
		{"sam", "acct_sam", "2026-07-28"},
	} {
		t.Run(c.rev, func(t *testing.T) {
			lb := &alternate{urls: urls, token: h.idp.AccessToken(t, "claude", c.person)}
			cs := connectAlternating(t, h, lb, c.account, c.rev)
			if c.rev == "2025-11-25" {
				if err := cs.SetLoggingLevel(context.Background(), &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
			}
			sessionCalls(t, h, lb, cs)
			checkServed(t, h, lb, c.rev)
			if c.rev == "2025-11-25" {
				checkSessionEnds(t, h, lb, cs)
			}
		})
	}
}

// connectAlternating connects the go-sdk client, declaring URL
// elicitation, through lb with initialize on replica A; the verification
// pages it is offered it approves as account.
func connectAlternating(t *testing.T, h *hostedDeployment, lb *alternate, account, rev string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			u, err := url.Parse(r.Params.URL)
			if err != nil || r.Params.Mode != "url" {
				return nil, fmt.Errorf("elicitation %+v", r.Params)
			}
			if err := h.srv.ApproveDevice(u.Query().Get("user_code"), account, "poppy:read"); err != nil {
				return nil, err
			}
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lb.next(0)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.public + "/mcp", HTTPClient: &http.Client{Transport: lb}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect at %s: %v\n%s", rev, err, h.logged())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// sessionCalls lists the tools and calls discover_company, start_session
// and sign_in_device (on B), then sign_in_status, each request on the
// replica after the last.
func sessionCalls(t *testing.T, h *hostedDeployment, lb *alternate, cs *sdk.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lb.next(1)
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v\n%s", err, h.logged())
		}
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "discover_company") || !slices.Contains(names, "start_session") {
		t.Fatalf("tools/list: %v", names)
	}
	for _, call := range []struct {
		name string
		args map[string]any
	}{
		{"discover_company", map[string]any{"domain": "example.com"}},
		{"start_session", map[string]any{"domain": "example.com"}},
	} {
		if got, isErr := callAt(ctx, t, cs, call.name, call.args); isErr || got == nil {
			t.Fatalf("%s: %v\n%s", call.name, got, h.logged())
		}
	}
	lb.next(1)
	got, isErr := callAt(ctx, t, cs, "sign_in_device", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	if isErr || got["elicitation"] != "accept" {
		t.Fatalf("sign_in_device: %v, want the page offered by elicitation and accepted\n%s", got, h.logged())
	}
	st, _ := callAt(ctx, t, cs, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 20})
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status: %v", st)
	}
}

// callAt calls a tool and returns its structured content and whether it
// is an error result.
func callAt(ctx context.Context, t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, _ := res.StructuredContent.(map[string]any)
	return m, res.IsError
}

// checkServed: both replicas served tool calls; at 2025-11-25 the session
// was initialized on A, sign_in_device was called on B and answered
// (elicitation) on A, and B, which never saw logging/setLevel, sent log
// notifications; at 2026-07-28 no response carried a session ID and no
// request was a GET or DELETE.
func checkServed(t *testing.T, h *hostedDeployment, lb *alternate, rev string) {
	t.Helper()
	reqs := lb.requests()
	calls := map[int]int{}
	var signIn, answer, setLevel = -1, -1, -1
	logsFrom := map[int]bool{}
	for _, s := range reqs {
		switch {
		case s.method == "tools/call" && s.tool == "sign_in_device":
			signIn = s.replica
		case s.method == "answer" && signIn >= 0 && answer < 0:
			answer = s.replica
		case s.method == "logging/setLevel":
			setLevel = s.replica
		}
		if s.method == "tools/call" && s.status == 200 {
			calls[s.replica]++
		}
		if s.method == "tools/call" && strings.Contains(s.body.String(), "notifications/message") {
			logsFrom[s.replica] = true
		}
		if rev == "2026-07-28" && (s.session || s.method == http.MethodGet || s.method == http.MethodDelete) {
			t.Errorf("at 2026-07-28, %s on replica %c: a session (header %v)", s.method, 'A'+s.replica, s.session)
		}
	}
	if calls[0] == 0 || calls[1] == 0 {
		t.Errorf("tool calls by replica: %v, want both", calls)
	}
	if rev != "2025-11-25" {
		return
	}
	if reqs[0].method != "initialize" || reqs[0].replica != 0 || !reqs[0].session {
		t.Errorf("the first request: %+v, want initialize on A, answered with a session", reqs[0])
	}
	if signIn != 1 || answer != 0 {
		t.Errorf("sign_in_device on replica %d, its elicitation answered on %d: want B (1), then A (0)", signIn, answer)
	}
	if setLevel < 0 || !logsFrom[1-setLevel] {
		t.Errorf("logging/setLevel on replica %d; log notifications came from %v: want the other one too\n%s", setLevel, logsFrom, h.logged())
	}
}

// checkSessionEnds: sam's token in dana's session is refused on both
// replicas; dana's client ends the session (DELETE) on one replica and
// the other answers 404 with a JSON-RPC error naming the cause.
func checkSessionEnds(t *testing.T, h *hostedDeployment, lb *alternate, cs *sdk.ClientSession) {
	t.Helper()
	sid := cs.ID()
	samToken := h.idp.AccessToken(t, "claude", "sam")
	for i, u := range lb.urls {
		hdr := map[string]string{"Authorization": "Bearer " + samToken, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
		if code := postBody(t, u, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, hdr); code != http.StatusNotFound {
			t.Errorf("sam in dana's MCP session on replica %c: %d, want 404", 'A'+i, code)
		}
	}
	lb.mu.Lock()
	deleted := lb.get % len(lb.urls)
	lb.mu.Unlock()
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	other := lb.urls[1-deleted]
	req, _ := http.NewRequest(http.MethodPost, other, strings.NewReader(`{"jsonrpc":"2.0","id":10,"method":"tools/list"}`))
	for k, v := range map[string]string{"Authorization": "Bearer " + lb.token, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25",
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(body, &e); resp.StatusCode != 404 || e.ID != 10 || !strings.Contains(e.Error.Message, "has ended") {
		t.Errorf("the session, ended on replica %c, on the other: %d %s", 'A'+deleted, resp.StatusCode, body)
	}
	if n := slices.IndexFunc(lb.requests(), func(s served) bool { return s.method == http.MethodDelete }); n < 0 {
		t.Error("the go-sdk client sent no DELETE: the test proved nothing of ending a session")
	}
}
