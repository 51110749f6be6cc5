package main

// BenchmarkHostedWaiting measures a hosted deployment under many waiting
// people (BENCHMARKS.md "Hosted: people waiting"): POPPY_BENCH_PEOPLE people
// (default 1,000), each with an access token of a real authorization server
// (internal/oidctest), each with a read_events long-poll open, through two
// `serve --http --auth-issuer` replicas on one PostgreSQL database and
// through one replica on SQLite, against poppytest. It reports the replicas'
// resident memory (and live heap and stacks, from the Go runtime's GC
// trace) per waiting person and the p50/p99 latency of an
// unrelated person's send_message, idle and under that load. Run it with
// scripts/bench-hosted.sh; it is not run by `go test`.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// benchSamples is how many send_message calls each latency figure is of.
const benchSamples = 200

func BenchmarkHostedWaiting(b *testing.B) {
	people := 1000
	if n, err := strconv.Atoi(os.Getenv("POPPY_BENCH_PEOPLE")); err == nil && n > 0 {
		people = n
	}
	b.Run("replicas=2/postgres", func(b *testing.B) { benchHosted(b, 2, postgresURL(b), people) })
	b.Run("replicas=1/sqlite", func(b *testing.B) { benchHosted(b, 1, "", people) })
}

// hostedBench is a hosted deployment of n replicas under measurement.
type hostedBench struct {
	srv    *poppytest.Server
	idp    *oidctest.Provider
	procs  []int    // the replicas' process IDs
	debug  []string // their metrics listeners' base URLs, with app.DebugMemoryEnv
	urls   []string
	next   atomic.Int64 // round robin over urls, as a load balancer would
	target atomic.Pointer[url.URL]
}

func benchHosted(b *testing.B, replicas int, dbURL string, people int) {
	h := startHostedBench(b, replicas, dbURL)
	ctx := context.Background()
	unrelated := h.person(b, "unrelated")
	conv := h.conversation(b, unrelated)
	h.sendLatencies(b, unrelated, conv, 20) // warm up
	idle := h.sendLatencies(b, unrelated, conv, benchSamples)
	liveBefore, goBefore := h.live(b)
	before := h.rss(b)

	clients := make([]*sdk.ClientSession, people)
	convs := make([]string, people)
	h.parallel(b, people, func(i int) error {
		cs, err := h.connect(h.token(b, fmt.Sprintf("person%04d", i)))
		if err != nil {
			return err
		}
		clients[i] = cs
		convs[i], err = startConversation(ctx, cs, fmt.Sprintf("person%04d", i))
		return err
	})
	reads := h.eventReads()
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	var ended atomic.Int64
	for i, cs := range clients {
		go func() {
			_, _ = callBench(waitCtx, cs, "read_events", map[string]any{"domain": "example.com", "conversation_id": convs[i], "wait_seconds": 60})
			ended.Add(1)
		}()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for h.eventReads() < reads+people {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d long-polls reached the Company", h.eventReads()-reads, people)
		}
		time.Sleep(100 * time.Millisecond)
	}
	during := h.rss(b)
	loaded := h.sendLatencies(b, unrelated, conv, benchSamples)
	liveDuring, goDuring := h.live(b)
	h.profile(b, strings.ReplaceAll(b.Name(), "/", "_"))
	if n := ended.Load(); n > 0 {
		b.Errorf("%d long-polls ended during the measurement", n)
	}
	perPerson := float64(during-before) / float64(people) / 1024
	livePerPerson := float64(liveDuring-liveBefore) / float64(people) / 1024
	b.ReportMetric(perPerson, "KiB/waiting-person")
	b.ReportMetric(float64(goDuring-goBefore)/float64(people), "goroutines/waiting-person")
	b.ReportMetric(livePerPerson, "live-KiB/waiting-person")
	b.ReportMetric(ms(pct(idle, 50)), "idle-p50-ms")
	b.ReportMetric(ms(pct(idle, 99)), "idle-p99-ms")
	b.ReportMetric(ms(pct(loaded, 50)), "loaded-p50-ms")
	b.ReportMetric(ms(pct(loaded, 99)), "loaded-p99-ms")
	b.Logf("%d replicas, %d people waiting: RSS %d -> %d KiB (%.1f KiB/person), live heap and stacks after GC %d -> %d KiB (%.1f KiB/person); send_message idle p50 %.1f p99 %.1f ms, loaded p50 %.1f p99 %.1f ms",
		replicas, people, before/1024, during/1024, perPerson, liveBefore/1024, liveDuring/1024, livePerPerson, ms(pct(idle, 50)), ms(pct(idle, 99)), ms(pct(loaded, 50)), ms(pct(loaded, 99)))
}

// benchCompany is the Company's shape: poppytest's default, or without its
// MCP server when POPPY_BENCH_NO_MCP is set, to measure what each person's
// relay to it costs.
func benchCompany() *poppytest.Options {
	if os.Getenv("POPPY_BENCH_NO_MCP") == "" {
		return nil
	}
	return &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		apis := doc["apis"].([]any)
		kept := apis[:0]
		for _, a := range apis {
			if a.(map[string]any)["type"] != "mcp" {
				kept = append(kept, a)
			}
		}
		doc["apis"] = kept
	}}
}

// startHostedBench starts poppytest, the authorization server and n
// replicas of `serve --http --auth-issuer`, on PostgreSQL at dbURL or, with
// dbURL empty, on one SQLite state directory.
func startHostedBench(b *testing.B, n int, dbURL string) *hostedBench {
	h := &hostedBench{srv: poppytest.NewServer(b, benchCompany()), idp: oidctest.New(b, &oidctest.Options{TokenLifetime: time.Hour})}
	public := "https://" + h.srv.AgentHost()
	h.idp.AddClient(oidctest.Client{ID: "claude", RedirectURIs: []string{"https://client.test/cb"}, Audience: []string{public + "/mcp"}})
	_, resolve := companyArgs(b, h.srv)
	ca := filepath.Join(b.TempDir(), "cas.pem")
	if err := os.WriteFile(ca, append(h.srv.CAPEM(), h.idp.CAPEM()...), 0o600); err != nil {
		b.Fatal(err)
	}
	// gctrace: each GC prints the live heap it left and the stacks' size.
	// The metrics listener's memory debugging (app.DebugMemoryEnv) reports
	// the live heap and stacks after a collection.
	env := []string{"SSL_CERT_FILE=" + ca, "POPPY_STATE_KEY=" + newKey(), app.DebugMemoryEnv + "=1"}
	state := b.TempDir()
	store := []string{"--state-dir", state}
	if dbURL != "" {
		store = append(store, "--store", dbURL)
	}
	if _, errOut, code := runBinary(b, env, append([]string{"init", "--out", b.TempDir(), "--client-id", public + "/agent.json"}, store...)...); code != 0 {
		b.Fatalf("init: %s", errOut)
	}
	for range n {
		args := append([]string{"serve", "--http", "127.0.0.1:0", "--public-url", public,
			"--auth-issuer", h.idp.Issuer(), "--resolve", h.idp.Host() + ":443:" + h.idp.Addr(), "--metrics-addr", "127.0.0.1:0"}, append(store, resolve...)...)
		cmd, u, logged := startProcess(b, env, args...)
		m := metricsURL.FindStringSubmatch(logged.String())
		if m == nil {
			b.Fatalf("no metrics URL logged: %s", logged.String())
		}
		h.procs, h.urls, h.debug = append(h.procs, cmd.Process.Pid), append(h.urls, u), append(h.debug, strings.TrimSuffix(m[1], app.MetricsPath))
	}
	target, _ := url.Parse(strings.TrimSuffix(h.urls[0], "/mcp"))
	h.target.Store(target)
	h.srv.Handle(h.srv.AgentHost(), "/", &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(h.target.Load())
		r.Out.Host = r.In.Host
	}})
	return h
}

// token is an access token of person for the deployment.
func (h *hostedBench) token(b *testing.B, person string) string {
	return h.idp.AccessToken(b, "claude", person)
}

// person connects a client for person through the next replica.
func (h *hostedBench) person(b *testing.B, person string) *sdk.ClientSession {
	cs, err := h.connect(h.token(b, person))
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// connect connects a go-sdk client at 2026-07-28 through the next replica.
func (h *hostedBench) connect(token string) (*sdk.ClientSession, error) {
	u := h.urls[int(h.next.Add(1))%len(h.urls)]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	hc := &http.Client{Transport: headerTransport{bearer(token)}}
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: hc, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
}

// conversation starts the unrelated person's conversation.
func (h *hostedBench) conversation(b *testing.B, cs *sdk.ClientSession) string {
	id, err := startConversation(context.Background(), cs, "unrelated")
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// startConversation starts a conversation of person and reads it until
// the Company Agent has answered, so a later read waits for something new.
// Each person's text differs: until state is kept per person, the same
// content from two people would be one pending message, with one ID.
func startConversation(ctx context.Context, cs *sdk.ClientSession, person string) (string, error) {
	got, err := callBench(ctx, cs, "send_message", map[string]any{"domain": "example.com", "text": "Where is my order? (" + person + ")", "wait_seconds": 10})
	if err != nil {
		return "", err
	}
	id, _ := got["conversation_id"].(string)
	if id == "" {
		return "", fmt.Errorf("send_message = %v", got)
	}
	return id, nil
}

// sendLatencies times n send_message calls of cs to conv, without waits.
func (h *hostedBench) sendLatencies(b *testing.B, cs *sdk.ClientSession, conv string, n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if _, err := callBench(context.Background(), cs, "send_message",
			map[string]any{"domain": "example.com", "conversation_id": conv, "text": fmt.Sprintf("Note %d", i), "wait_seconds": 0}); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// eventReads counts the reads of events the Company received.
func (h *hostedBench) eventReads() int {
	n := 0
	for _, r := range h.srv.Requests() {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/events") {
			n++
		}
	}
	return n
}

// rss is the replicas' resident memory in bytes, summed.
func (h *hostedBench) rss(b *testing.B) int64 {
	var sum int64
	for _, pid := range h.procs {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				sum += kb * 1024
			}
		}
	}
	return sum
}

// live is the replicas' live heap after a collection plus their goroutine
// stacks, in bytes, summed, and their goroutines (app.DebugGCPath).
func (h *hostedBench) live(b *testing.B) (bytes, goroutines int64) {
	for _, base := range h.debug {
		resp, err := http.Post(base+app.DebugGCPath, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		var m app.MemoryAfterGC
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(m.HeapLive + m.Stacks)
		goroutines += int64(m.Goroutines)
	}
	return bytes, goroutines
}

// profile keeps each replica's heap profile as name-N.pprof in the
// directory POPPY_BENCH_PROFILE names, if it is set.
func (h *hostedBench) profile(b *testing.B, name string) {
	dir := os.Getenv("POPPY_BENCH_PROFILE")
	if dir == "" {
		return
	}
	for i, base := range h.debug {
		for _, p := range []string{"heap", "goroutine"} {
			resp, err := http.Get(base + "/debug/pprof/" + p)
			if err != nil {
				b.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.%s.pprof", name, i, p)), raw, 0o600)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// parallel runs f for 0..n-1 on 16 workers and fails on the first error.
func (h *hostedBench) parallel(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && first.Load() == nil; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		b.Fatal(*err)
	}
}

// callBench calls a tool and returns its structured content, or an error
// for a failed call or an isError result.
func callBench(ctx context.Context, cs *sdk.ClientSession, name string, args map[string]any) (map[string]any, error) {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, _ := res.StructuredContent.(map[string]any)
	if res.IsError {
		var text string
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*sdk.TextContent); ok {
				text = tc.Text
			}
		}
		return m, fmt.Errorf("%s: %s", name, text)
	}
	return m, nil
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
