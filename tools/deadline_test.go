package tools_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// stdioConnect serves ts over in-process pipes with ServeStdio, as
// `poppy-mcp serve` does over stdin and stdout, and connects the go-sdk
// client to it at revision.
func stdioConnect(t *testing.T, ts *tools.Server, revision string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- ts.ServeStdio(ctx, serverIn, serverOut, log.New(io.Discard, "", 0)) }()
	t.Cleanup(func() {
		cancel()
		clientOut.Close()
		serverOut.Close()
		<-served
	})
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-stdio-test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, &sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect over stdio at %s: %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestStdioQuickToolBesideLongWaits: over stdio, a quick tool answers while
// more long waits are held than mcp-go's default pool of 5 workers has.
// Eight sign_in_status calls wait (up to 50 s) for a device sign-in; once
// at least five are known to be running, a quick call must come back while
// all eight still wait. On the old code (5 workers) the quick call queued
// behind the waits and came back only after the first had ended. It runs
// beside the package's other tests, which serve HTTP, never stdio; not in a
// synctest bubble, since mcp-go's stdio server selects on a channel of its
// package, made outside any bubble, so the bubble's clock would never move.
func TestStdioQuickToolBesideLongWaits(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions { // one at a time: mcp-go has one stdio session per process
		t.Run(rev, func(t *testing.T) { quickBesideWaits(t, rev) })
	}
}

func quickBesideWaits(t *testing.T, rev string) {
	const waits = 8
	h := newSignInHarness(t, signInOpts(nil))
	var mu sync.Mutex
	running := map[any]bool{} // progress tokens of the waits seen running
	started := make(chan struct{}, 1)
	cs := stdioConnect(t, h.tools, rev, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			running[req.Params.ProgressToken] = true
			if len(running) >= 5 {
				select {
				case started <- struct{}{}:
				default:
				}
			}
		},
	})
	_, got := startDevice(t, cs, "poppy:read")
	var ended atomic.Int32
	var wg sync.WaitGroup
	for i := range waits {
		wg.Go(func() {
			p := &sdk.CallToolParams{Name: "sign_in_status", Arguments: map[string]any{"domain": domain, "wait_seconds": 50}}
			p.SetProgressToken(fmt.Sprintf("wait-%d", i))
			if _, err := cs.CallTool(context.Background(), p); err != nil {
				t.Errorf("wait %d: %v", i, err)
			}
			ended.Add(1)
		})
	}
	<-started
	res, quick := call(t, cs, "sign_in_status", map[string]any{"domain": domain})
	if n := ended.Load(); n != 0 || res.IsError || quick["status"] != "pending" {
		t.Errorf("the quick call came back after %d of the waits ended: %v", n, quick)
	}
	if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestToolCallDeadline: a tool call whose Company never answers ends at the
// call's deadline with a result that says so, and poppy-mcp goes on
// answering. The old code had no deadline: with a Company that holds the
// request, discover_company never returned (the client's own 20 s timeout
// failed the test).
func TestToolCallDeadline(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T, n *memnet.Network) {
				h := newSignInHarnessOn(t, n, nil)
				release := make(chan struct{})
				t.Cleanup(func() { close(release) })
				h.company.HandleFunc("slow.example.com", "GET /.well-known/poppy.json", func(w http.ResponseWriter, r *http.Request) {
					select { // holds the request until the agent gives up or the test ends
					case <-r.Context().Done():
					case <-release:
					}
				})
				// A client without a timeout of its own, as documentClient's is not in tests.
				docs := &http.Client{Transport: cache.New(h.company.Transport(), nil)}
				ts := tools.New(discovery.New(docs, nil), &tools.Options{
					Agent: h.agent, Store: h.store, Pages: h.pages, CallTimeout: 3 * time.Second,
					Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
				})
				t.Cleanup(ts.Close)
				t.Cleanup(func() { ts.ShutdownHTTP(context.Background()) })
				hs := newHTTPServer(ts.HTTPHandler(), h.net)
				t.Cleanup(hs.Close)
				h.url = hs.URL + "/mcp"
				cs := h.connect(t, rev)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "discover_company", Arguments: map[string]any{"domain": "slow.example.com"}})
				if err != nil {
					t.Fatalf("discover_company of a Company that never answers: %v", err)
				}
				text := res.Content[0].(*sdk.TextContent).Text
				if !res.IsError || !strings.Contains(text, "did not finish within") {
					t.Errorf("result = %q (isError %v)", text, res.IsError)
				}
				if res, got := call(t, cs, "discover_company", map[string]any{"domain": domain}); res.IsError {
					t.Errorf("the next call: %v", got)
				}
			})
		})
	}
}

// TestDrain: Drain turns new tool calls away with a result that says to
// call again, and returns once the call in flight (a discover_company held
// by a Company that does not answer yet) has finished, not before. The old
// code had no Drain: a shutdown cut the calls in flight short.
func TestDrain(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T, n *memnet.Network) {
				h := newSignInHarnessOn(t, n, nil)
				entered, release := make(chan struct{}, 1), make(chan struct{})
				h.company.HandleFunc("slow.example.com", "GET /.well-known/poppy.json", func(w http.ResponseWriter, r *http.Request) {
					entered <- struct{}{}
					<-release
					http.Error(w, "not here", http.StatusNotFound)
				})
				cs := h.connect(t, rev)
				inFlight := make(chan *sdk.CallToolResult, 1)
				go func() {
					res, _ := call(t, cs, "discover_company", map[string]any{"domain": "slow.example.com"})
					inFlight <- res
				}()
				<-entered
				drained := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					drained <- h.tools.Drain(ctx)
				}()
				refused := false
				for range 200 {
					if _, got := call(t, cs, "discover_company", map[string]any{"domain": domain}); got["error"] == "shutting_down" {
						refused = true
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				if !refused {
					t.Fatal("calls made while draining were not turned away")
				}
				select {
				case err := <-drained:
					t.Fatalf("Drain returned (%v) while a call was in flight", err)
				default:
				}
				close(release)
				if res := <-inFlight; res == nil {
					t.Fatal("the call in flight got no result")
				}
				if err := <-drained; err != nil {
					t.Errorf("Drain: %v", err)
				}
			})
		})
	}
}

// TestDrainEndsWaits: a read_events waiting for events (wait_seconds 50)
// when a drain bounded at 9 s begins stops waiting before that bound and
// answers with a result, so Drain returns nil. The old code let the wait
// run on until the drain's bound cut the call off: no answer for the client.
func TestDrainEndsWaits(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T, n *memnet.Network) {
				h := newSignInHarnessOn(t, n, nil)
				cs := h.connect(t, rev)
				first := send(t, cs, map[string]any{"text": "Hello"})
				id := first["conversation_id"].(string)
				waiting := make(chan *sdk.CallToolResult, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
					defer cancel()
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_events",
						Arguments: map[string]any{"conversation_id": id, "wait_seconds": 50}})
					if err != nil {
						t.Errorf("read_events: %v", err)
					}
					waiting <- res
				}()
				waitUntil(t, "the read to wait at the Company", func() bool {
					for _, r := range h.company.Requests() {
						if r.Method == http.MethodGet && strings.Contains(r.RawQuery, "wait=") {
							return true
						}
					}
					return false
				})
				// The drain's bound is far below the 50 s wait: the wait must end for Drain to return nil.
				ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
				defer cancel()
				if err := h.tools.Drain(ctx); err != nil {
					t.Fatalf("Drain: %v", err)
				}
				res := <-waiting
				if res == nil {
					t.Fatal("the waiting call got no result")
				}
				text := res.Content[0].(*sdk.TextContent).Text
				if res.IsError && !strings.Contains(text, "stopped waiting") {
					t.Errorf("result = %q", text)
				}
			})
		})
	}
}
