package main

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// replicaSet is two `serve --http` replicas of one deployment: one
// PostgreSQL database, one POPPY_STATE_KEY, one --http-token, against a
// poppytest Company reached by --resolve. poppytest serves the public URL
// (its AgentHost) through a reverse proxy to a live replica, as a load
// balancer would.
type replicaSet struct {
	srv    *poppytest.Server
	token  string
	procs  [2]*exec.Cmd
	urls   [2]string
	logs   [2]*testlog.Buffer
	target atomic.Pointer[url.URL] // where the public URL leads
}

func startReplicas(t *testing.T) *replicaSet {
	t.Helper()
	dbURL := postgresURL(t)
	srv := poppytest.NewServer(t, &poppytest.Options{DeviceInterval: time.Second})
	env, resolve := companyArgs(t, srv)
	rs := &replicaSet{srv: srv, token: "replicas-token-0123456789-abcdefghijklmnop"}
	env = append(env, "POPPY_STATE_KEY="+newKey(), "POPPY_HTTP_TOKEN="+rs.token)
	public := "https://" + srv.AgentHost()
	if _, errOut, code := runBinary(t, env, "init", "--store", dbURL, "--state-dir", t.TempDir(), "--out", t.TempDir(),
		"--client-id", public+"/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	for i := range rs.procs {
		args := append([]string{"serve", "--store", dbURL, "--state-dir", t.TempDir(), "--log-level", "debug",
			"--http", "127.0.0.1:0", "--public-url", public}, resolve...)
		rs.procs[i], rs.urls[i], rs.logs[i] = startProcess(t, env, args...)
	}
	rs.lead(1)
	srv.Handle(srv.AgentHost(), "/", &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(rs.target.Load())
		r.Out.Host = r.In.Host
	}})
	return rs
}

// lead sends the public URL's requests to replica i.
func (rs *replicaSet) lead(i int) {
	u, _ := url.Parse(strings.TrimSuffix(rs.urls[i], "/mcp"))
	rs.target.Store(u)
}

// logged is what both replicas wrote, for a failure message.
func (rs *replicaSet) logged() string {
	return "replica A:\n" + rs.logs[0].String() + "\nreplica B:\n" + rs.logs[1].String()
}

// devicePolls counts the device_code grants the Company received.
func devicePolls(srv *poppytest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "device_code") {
			n++
		}
	}
	return n
}

// waitFor waits, up to d, until ok holds.
func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplicasFailover: two replicas on one PostgreSQL database. A device
// sign-in is started through replica A, and a message sent through A whose
// answer the Company drops after accepting it; A is killed (SIGKILL) while
// it polls. The user approves; replica B takes the polling over within
// seconds, and sign_in_status through B says complete and signed in; B's
// next conversation call sends the pending message again with its ID, and
// the Company has it exactly once. On the old code B knew of no sign-in
// ("no_sign_in"), and nothing polled it after A died.
func TestReplicasFailover(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			rs := startReplicas(t)
			a, b := connectAt(t, rs.urls[0], rs.token, rev), connectAt(t, rs.urls[1], rs.token, rev)
			got := callTool(t, a, "sign_in_device", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
			code, _ := got["user_code"].(string)
			if got["status"] != "pending" || code == "" {
				t.Fatalf("sign_in_device through A = %v\n%s", got, rs.logged())
			}
			// The message through A: the Company accepts it and holds the
			// answer, so A dies with it in flight, pending in the store.
			held, release := rs.srv.HoldNextPost()
			defer release()
			go a.CallTool(context.Background(), &sdk.CallToolParams{Name: "send_message",
				Arguments: map[string]any{"domain": "example.com", "text": "Please hold order 1042", "wait_seconds": 0}})
			select {
			case <-held:
			case <-time.After(20 * time.Second):
				t.Fatalf("the message through A did not reach the Company\n%s", rs.logged())
			}
			waitFor(t, 20*time.Second, "poll by A", func() bool { return devicePolls(rs.srv) > 0 })
			if err := rs.procs[0].Process.Kill(); err != nil {
				t.Fatal(err)
			}
			rs.procs[0].Wait()
			release()
			killed := devicePolls(rs.srv)
			if err := rs.srv.ApproveDevice(code, "acct_dana"); err != nil {
				t.Fatal(err)
			}
			var st map[string]any
			waitFor(t, 60*time.Second, "completed sign-in through B", func() bool {
				st = callTool(t, b, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 10})
				return st["status"] != "pending"
			})
			if st["status"] != "complete" || st["signed_in"] != true {
				t.Fatalf("sign_in_status through B = %v\n%s", st, rs.logged())
			}
			if devicePolls(rs.srv) == killed {
				t.Errorf("B reported the sign-in complete without polling")
			}
			// B's calls send A's pending message again, with its ID, once
			// A's lease on it expires.
			convs := rs.srv.Conversations()
			if len(convs) != 1 {
				t.Fatalf("the Company has %d conversations, want the one A started", len(convs))
			}
			waitFor(t, 30*time.Second, "resend through B", func() bool {
				r := callTool(t, b, "read_events", map[string]any{"domain": "example.com", "conversation_id": convs[0].ID, "wait_seconds": 0})
				resent, _ := r["resent"].([]any)
				return len(resent) > 0
			})
			if n := recorded(rs.srv, "Please hold order 1042"); n != 1 || len(rs.srv.Conversations()) != 1 {
				t.Errorf("the Company recorded the message sent through A %d times in %d conversations, want once", n, len(rs.srv.Conversations()))
			}
			if strings.Contains(rs.logged(), rs.token) {
				t.Error("a replica logged the bearer token")
			}
		})
	}
}

// recorded counts the agent's messages with text the Company recorded,
// across its conversations.
func recorded(srv *poppytest.Server, text string) int {
	n := 0
	for _, c := range srv.Conversations() {
		for _, m := range srv.Messages(c.ID) {
			if m.Text == text {
				n++
			}
		}
	}
	return n
}

// TestReplicasSignInWaitElsewhere: sign_in_status through replica B waits
// for a sign-in replica A polls, with progress notifications to B's client
// while it waits, and answers complete once A finishes it (A announces it
// with PostgreSQL NOTIFY; B reads the store); B's Session is then signed
// in too. On the old code B knew of no sign-in. At 2025-11-25, B answers
// a request of A's MCP session too.
func TestReplicasSignInWaitElsewhere(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			rs := startReplicas(t)
			var progress atomic.Int32
			a := connectAt(t, rs.urls[0], rs.token, rev)
			b := connectWith(t, rs.urls[1], rs.token, rev, &sdk.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { progress.Add(1) },
			})
			got := callTool(t, a, "sign_in_device", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
			code, _ := got["user_code"].(string)
			waitFor(t, 20*time.Second, "poll by A", func() bool { return devicePolls(rs.srv) > 0 })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			params := &sdk.CallToolParams{Name: "sign_in_status", Arguments: map[string]any{"domain": "example.com", "wait_seconds": 45}}
			params.SetProgressToken("wait-b")
			done := make(chan *sdk.CallToolResult, 1)
			go func() {
				res, err := b.CallTool(ctx, params)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			waitFor(t, 20*time.Second, "progress through B", func() bool { return progress.Load() > 0 })
			if err := rs.srv.ApproveDevice(code, "acct_dana"); err != nil {
				t.Fatal(err)
			}
			res := <-done
			st, _ := res.StructuredContent.(map[string]any)
			if st["status"] != "complete" || st["signed_in"] != true {
				t.Fatalf("sign_in_status through B = %v\n%s", st, rs.logged())
			}
			if got := callTool(t, b, "start_session", map[string]any{"domain": "example.com"}); got["signed_in"] != true {
				t.Errorf("B's Session after the sign-in: %v", got)
			}
			if rev == "2025-11-25" {
				// Every replica accepts a 2025-11-25 session's ID (mcp-go's
				// IDs are not tracked), so a client moved to another replica
				// goes on; what the session held in memory (its capabilities,
				// its GET stream, a pending server request) does not follow.
				hdr := map[string]string{"Authorization": "Bearer " + rs.token, "Mcp-Session-Id": a.ID(), "MCP-Protocol-Version": rev}
				if code := postBody(t, rs.urls[1], `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, hdr); code != http.StatusOK {
					t.Errorf("A's MCP session at B: %d, want 200", code)
				}
			}
		})
	}
}

// connectWith is connectAt with client options.
func connectWith(t *testing.T, u, token, rev string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, opts)
	hc := &http.Client{Transport: headerTransport{bearer(token)}}
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: hc, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect at %s: %v", rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
