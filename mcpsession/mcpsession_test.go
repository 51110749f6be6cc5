package mcpsession_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/mcpsession"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// replica is one process's MCP server and handler, over a shared store.
func replica(t *testing.T, st *store.Store, events mcpsession.Events) *httptest.Server {
	t.Helper()
	srv := server.NewMCPServer("test", "1", server.WithLogging())
	srv.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess := server.ClientSessionFromContext(ctx)
		info, _ := sess.(server.SessionWithClientInfo)
		logs, _ := sess.(server.SessionWithLogging)
		if info == nil || logs == nil {
			return mcp.NewToolResultText("no session"), nil
		}
		c := info.GetClientCapabilities()
		return mcp.NewToolResultText(fmt.Sprintf("client=%s elicitation=%v level=%s",
			info.GetClientInfo().Name, c.Elicitation != nil, logs.GetLogLevel())), nil
	})
	h := mcpsession.New(srv, st, &mcpsession.Options{Events: events}, server.WithEndpointPath("/mcp"))
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); _ = h.Shutdown(context.Background()) })
	return hs
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), &store.Options{Key: make([]byte, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// send sends an MCP message (a POST), or a GET or DELETE when body is "",
// to hs in the session sid; it returns the status, the session header
// and the body.
func send(t *testing.T, hs *httptest.Server, method, sid, body string, hdr ...string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, hs.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const (
	initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",
		"capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"the-client","version":"9"}}}`
	whoami = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
)

// TestSessionAcrossReplicas: a session opened on replica A, first used
// on B, then its log level set on A, is served on B as its client declared it (its name,
// its elicitation capability, its level), where mcp-go alone would serve
// a session of a client that declared nothing; ended on B, it is refused
// on A with 404 and a JSON-RPC error that says so; another person's view
// of the store does not know it.
func TestSessionAcrossReplicas(t *testing.T) {
	st := openStore(t)
	a, b := replica(t, st.ForUser("dana"), nil), replica(t, st.ForUser("dana"), nil)
	code, sid, body := send(t, a, http.MethodPost, "", initialize)
	if code != 200 || sid == "" {
		t.Fatalf("initialize on A: %d %q %s", code, sid, body)
	}
	// B brings the session back before its level is set on A, and follows.
	for _, step := range []struct {
		at  *httptest.Server
		msg string
	}{
		{b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{a, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`},
	} {
		if code, _, body := send(t, step.at, http.MethodPost, sid, step.msg); code >= 300 {
			t.Fatalf("%s: %d %s", step.msg, code, body)
		}
	}
	const want = "client=the-client elicitation=true level=debug"
	for _, r := range []*httptest.Server{b, a, b} {
		if code, _, body := send(t, r, http.MethodPost, sid, whoami); code != 200 || !strings.Contains(body, want) {
			t.Fatalf("whoami: %d %s, want %q", code, body, want)
		}
	}
	other := replica(t, st.ForUser("sam"), nil)
	if code, _, body := send(t, other, http.MethodPost, sid, whoami); code != 404 || !strings.Contains(body, "-32001") {
		t.Errorf("sam's handler in dana's session: %d %s, want 404", code, body)
	}
	if code, _, body := send(t, b, http.MethodDelete, sid, ""); code != 200 {
		t.Fatalf("DELETE on B: %d %s", code, body)
	}
	checkEnded(t, a, sid)
	if code, _, body := send(t, a, http.MethodPost, "", whoami); code != 400 || !strings.Contains(body, "initialize first") {
		t.Errorf("a request without a session: %d %s, want 400", code, body)
	}
}

// checkEnded: a request in the session sid on r gets 404 and a JSON-RPC
// error that says the session has ended.
func checkEnded(t *testing.T, r *httptest.Server, sid string) {
	t.Helper()
	code, _, body := send(t, r, http.MethodPost, sid, whoami)
	var e struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e); code != 404 || e.ID != 3 || e.Error.Code != -32001 || !strings.Contains(e.Error.Message, "has ended") {
		t.Errorf("after the session ended on the other replica: %d %s, want 404 and a JSON-RPC error", code, body)
	}
}

// events is an event store that gave the IDs starting with "a-".
type events struct{ *server.InMemoryEventStore }

func (events) Issued(id string) bool { return strings.HasPrefix(id, "a-") }

// TestResumeOnAnotherReplica: a GET resuming a stream whose event ID the
// replica's event store did not give is refused with a JSON-RPC error
// that names the cause, not replayed from whatever this replica holds.
func TestResumeOnAnotherReplica(t *testing.T) {
	st := openStore(t).ForUser("dana")
	b := replica(t, st, events{server.NewInMemoryEventStore()})
	_, sid, _ := send(t, b, http.MethodPost, "", initialize)
	code, _, body := send(t, b, http.MethodGet, sid, "", "Last-Event-ID", "other-7")
	if code != 400 || !strings.Contains(body, "another replica") {
		t.Errorf("resuming another replica's stream: %d %s", code, body)
	}
}

// asking is a replica whose tool "ask" elicits, with the Answers of its
// process listening.
func asking(t *testing.T, st *store.Store) *httptest.Server {
	t.Helper()
	srv := server.NewMCPServer("test", "1", server.WithElicitation())
	srv.AddTool(mcp.NewTool("ask"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
			Mode: mcp.ElicitationModeURL, Message: "open", ElicitationID: "e1", URL: "https://example.com/"}})
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("answered " + string(res.Action)), nil
	})
	answers := mcpsession.NewAnswers(st)
	ctx, cancel := context.WithCancel(context.Background())
	go answers.Listen(ctx)
	h := mcpsession.New(srv, st, &mcpsession.Options{Answers: answers}, server.WithEndpointPath("/mcp"))
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); cancel(); _ = h.Shutdown(context.Background()) })
	return hs
}

// TestAnswerOnAnotherReplica: the client's answer to an elicitation that
// replica A sent on a tool call's stream, POSTed to replica B, reaches
// the call waiting on A, which returns with it.
func TestAnswerOnAnotherReplica(t *testing.T) {
	st := openStore(t).ForUser("dana")
	a, b := asking(t, st), asking(t, st)
	_, sid, _ := send(t, a, http.MethodPost, "", initialize)
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{}}}`))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid} {
		req.Header.Set(k, v)
	}
	resp, err := a.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := sseMessages(resp.Body)
	asked := <-events
	var elicit struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(asked), &elicit); elicit.Method != "elicitation/create" {
		t.Fatalf("the call's stream began with %s, want the elicitation", asked)
	}
	answer := `{"jsonrpc":"2.0","id":` + string(elicit.ID) + `,"result":{"action":"accept"}}`
	if code, _, body := send(t, b, http.MethodPost, sid, answer); code != http.StatusAccepted {
		t.Fatalf("the answer on B: %d %s", code, body)
	}
	if result := <-events; !strings.Contains(result, "answered accept") {
		t.Errorf("the call on A after the answer went to B: %s", result)
	}
}

// sseMessages sends the data of each SSE event read from r, then closes.
func sseMessages(r io.Reader) <-chan string {
	out := make(chan string, 8)
	go func() {
		defer close(out)
		b := make([]byte, 0, 4096)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			b = append(b, buf[:n]...)
			for {
				i := strings.Index(string(b), "\n\n")
				if i < 0 {
					break
				}
				for _, line := range strings.Split(string(b[:i]), "\n") {
					if data, ok := strings.CutPrefix(line, "data: "); ok {
						out <- data
					}
				}
				b = b[i+2:]
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}
