package tools_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// evictHarness serves one tools.Server, with an idle eviction time and a
// clock the test moves, to any person of a hosted deployment.
type evictHarness struct {
	*harness
	clock *testClock
	ts    *tools.Server
	mcp   http.Handler // ts.HTTPHandler()
}

const testEvictIdle = 10 * time.Minute

func newEvictHarness(t *testing.T) *evictHarness {
	t.Helper()
	h := newHarness(t, nil)
	clock := &testClock{}
	ts := tools.New(discovery.New(&http.Client{Transport: cache.New(h.base, nil)}, &discovery.Options{Holds: h.holds}), &tools.Options{
		Agent: h.agent, Store: h.store, Pages: h.pages, Now: clock.now, EvictIdle: testEvictIdle,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(ts.Close)
	return &evictHarness{harness: h, clock: clock, ts: ts, mcp: ts.HTTPHandler()}
}

// as connects a stateless (2026-07-28) client for person, which holds no
// GET stream open; closing it leaves the person idle.
func (e *evictHarness) as(t *testing.T, person mcpauth.User) (*sdk.ClientSession, *httptest.Server) {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mcp.ServeHTTP(w, r.WithContext(mcpauth.WithUser(r.Context(), person)))
	}))
	t.Cleanup(hs.Close)
	h2 := *e.harness
	h2.url = hs.URL + "/mcp"
	return h2.connect(t, revisions[1]), hs
}

// use has person start a Session and use the Company's APIs, then leave:
// it returns their Session's ID.
func (e *evictHarness) use(t *testing.T, person mcpauth.User) string {
	t.Helper()
	cs, hs := e.as(t, person)
	call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	_, got := call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
	cs.Close()
	hs.Close()
	return got["session_id"].(string)
}

// settle is the goroutines and heap once garbage is collected, after
// idle connections are closed: the goroutines counted are those that
// are not HTTP connections (the Company's own, poppytest fetching the
// agent's documents, stay open; connections are pooled, not a person's).
func (e *evictHarness) settle() (int, uint64) {
	if c, ok := e.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	n := 0
	for _, g := range strings.Split(goroutines(), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && !connection.MatchString(g) {
			n++
		}
	}
	return n, m.HeapAlloc
}

// connection matches the stack of a goroutine of an HTTP connection.
var connection = regexp.MustCompile(`net/http\.\((\*persistConn|\*conn|\*http2serverConn|\*http2ClientConn|\*http2clientConnReadLoop)\)`)

// TestIdlePersonForgotten: a person of a hosted poppy-mcp idle past
// Options.EvictIdle is forgotten: none of their goroutines (their Session
// claim's renewal, their MCP server's sweeper) is left, nor the memory of
// their state, and their next call finds their Session and their
// Company's tools again, from the store.
func TestIdlePersonForgotten(t *testing.T) {
	e := newEvictHarness(t)
	// A first person warms what every person shares (the documents' cache,
	// the catalogs, pooled connections), so what is measured is one person's.
	e.use(t, mcpauth.User{Issuer: "https://login.example.org", Subject: "warm"})
	e.clock.advance(testEvictIdle + time.Second)
	if n := tools.SweepIdle(e.ts, e.clock.now()); n != 1 {
		t.Fatalf("forgot %d people, want the first one", n)
	}
	g0, heap0 := e.settle()
	handlers := tools.HTTPHandlers(e.ts)

	dana := mcpauth.User{Issuer: "https://login.example.org", Subject: "dana"}
	id := e.use(t, dana)
	if n := tools.HTTPHandlers(e.ts); n != handlers+1 {
		t.Fatalf("%d MCP HTTP handlers kept with dana in, %d before: the test measures nothing", n, handlers)
	}
	if n := tools.SweepIdle(e.ts, e.clock.now()); n != 0 {
		t.Fatalf("forgot %d people who just left, want none", n)
	}
	if g, _ := e.settle(); g <= g0 {
		t.Fatalf("dana holds no goroutine before being forgotten (%d, %d before): the test measures nothing", g, g0)
	}
	e.clock.advance(testEvictIdle + time.Second)
	if n := tools.SweepIdle(e.ts, e.clock.now()); n != 1 {
		t.Fatalf("forgot %d people, want dana", n)
	}
	g1, heap1 := e.settleTo(g0)
	if g1 > g0 {
		t.Fatalf("%d goroutines after dana was forgotten, %d before she came:\n%s", g1, g0, goroutines())
	}
	// Her MCP HTTP handler, which holds her MCP server with every tool on
	// it (about 12 KiB), is not kept either (BENCHMARKS.md "Hosted: people
	// waiting", idle people): the heap's noise would hide one person's.
	if n := tools.HTTPHandlers(e.ts); n != handlers {
		t.Errorf("%d MCP HTTP handlers kept after dana was forgotten, %d before she came", n, handlers)
	}
	if grew := int64(heap1) - int64(heap0); grew > 256<<10 {
		t.Errorf("the heap grew by %d bytes after dana was forgotten, want what she held given back", grew)
	}

	cs, _ := e.as(t, dana)
	if names := toolNames(t, cs); len(names) == 0 {
		t.Error("dana's Company's API tools did not come back with her")
	}
	if _, got := call(t, cs, "start_session", map[string]any{"domain": "example.com"}); got["session_id"] != id {
		t.Errorf("session_id %v after coming back, want the one kept in the store, %s", got["session_id"], id)
	}
}

// goroutines is every goroutine's stack.
func goroutines() string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}

// settleTo settles until at most want goroutines are left, for up to a
// few seconds: connections and stopped goroutines take a moment to go.
func (e *evictHarness) settleTo(want int) (int, uint64) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		g, heap := e.settle()
		if g <= want || time.Now().After(deadline) {
			return g, heap
		}
	}
}
