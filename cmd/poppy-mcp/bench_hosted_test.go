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
	"os/exec"
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
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// benchSamples is how many send_message calls each latency figure is of.
const benchSamples = 200

// benchEvictIdle is the replicas' --evict-idle: short, so that the people
// who leave are forgotten within the benchmark.
const benchEvictIdle = 30 * time.Second

func BenchmarkHostedWaiting(b *testing.B) {
	people := benchCount("POPPY_BENCH_PEOPLE", 1000)
	idle := benchCount("POPPY_BENCH_IDLE", 10000)
	b.Run("replicas=2/postgres", func(b *testing.B) {
		benchHosted(b, startHostedBench(b, 2, postgresURL(b)), people, idle)
	})
	b.Run("replicas=1/sqlite", func(b *testing.B) { benchHosted(b, startHostedBench(b, 1, ""), people, 0) })
}

// benchCount is the count the environment variable name gives (0 leaves
// its part out), or def.
func benchCount(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// hostedBench is a hosted deployment of n replicas under measurement.
type hostedBench struct {
	srv    *poppytest.Server
	idp    *oidctest.Provider
	procs  []*exec.Cmd // the replicas
	debug  []string    // their metrics listeners' base URLs, with app.DebugMemoryEnv
	urls   []string
	next   atomic.Int64 // round robin over urls, as a load balancer would
	target atomic.Pointer[url.URL]
}

// benchHosted measures people waiting, then (idle > 0) idle people after
// they are forgotten, then (two replicas or more) how soon a replica
// takes over the work of one killed.
func benchHosted(b *testing.B, h *hostedBench, people, idle int) {
	unrelated := h.person(b, "unrelated")
	conv := h.conversation(b, unrelated)
	h.sendLatencies(b, unrelated, conv, 20) // warm up
	base := h.waiting(b, unrelated, conv, people)
	if idle > 0 {
		h.idlePeople(b, base, people, idle)
	}
	if len(h.procs) > 1 {
		h.takeover(b)
	}
}

// baseline is the replicas' memory before the people came.
type baseline struct{ live, goroutines int64 }

// waiting opens people read_events long-polls and measures the replicas'
// memory per waiting person and the unrelated person's send_message
// latency, idle and under that load. The long-polls end before it returns.
func (h *hostedBench) waiting(b *testing.B, unrelated *sdk.ClientSession, conv string, people int) baseline {
	idle := h.sendLatencies(b, unrelated, conv, benchSamples)
	liveBefore, goBefore := h.live(b)
	before := h.rss(b)
	stop, ended := h.longPolls(b, people)
	defer stop()
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
		len(h.procs), people, before/1024, during/1024, perPerson, liveBefore/1024, liveDuring/1024, livePerPerson, ms(pct(idle, 50)), ms(pct(idle, 99)), ms(pct(loaded, 50)), ms(pct(loaded, 99)))
	return baseline{liveBefore, goBefore}
}

// longPolls has people each start a conversation and then open a
// read_events long-poll of it, and returns once the Company holds them
// all; stop ends them and waits until the replicas have answered them.
func (h *hostedBench) longPolls(b *testing.B, people int) (stop func(), ended *atomic.Int64) {
	ctx := context.Background()
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
	waitCtx, cancel := context.WithCancel(ctx)
	ended = &atomic.Int64{}
	var wg sync.WaitGroup
	for i, cs := range clients {
		wg.Go(func() {
			_, _ = callBench(waitCtx, cs, "read_events", map[string]any{"domain": "example.com", "conversation_id": convs[i], "wait_seconds": 60})
			ended.Add(1)
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for h.eventReads() < reads+people {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d long-polls reached the Company", h.eventReads()-reads, people)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return func() { cancel(); wg.Wait() }, ended
}

// idlePeople has idle-people more people (beside the people who waited)
// start a Session and leave, waits until the replicas have forgotten them
// all (--evict-idle), and measures the live memory each idle person still
// costs.
func (h *hostedBench) idlePeople(b *testing.B, base baseline, people, idle int) {
	start := time.Now()
	h.parallel(b, idle-people, func(i int) error {
		cs, err := h.connect(h.token(b, fmt.Sprintf("idle%05d", i)))
		if err != nil {
			return err
		}
		defer cs.Close()
		_, err = callBench(context.Background(), cs, "start_session", map[string]any{"domain": "example.com"})
		return err
	})
	signedIn := time.Since(start)
	deadline := time.Now().Add(benchEvictIdle + 3*time.Minute)
	live, goroutines := h.live(b)
	for ; goroutines > base.goroutines+int64(20*len(h.procs)); live, goroutines = h.live(b) {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines %s after the last idle person left, %d before anyone came: not everyone was forgotten",
				goroutines, benchEvictIdle+3*time.Minute, base.goroutines)
		}
		time.Sleep(5 * time.Second)
	}
	h.profile(b, strings.ReplaceAll(b.Name(), "/", "_")+"_idle")
	perPerson := float64(live-base.live) / float64(idle) / 1024
	b.ReportMetric(perPerson, "KiB/idle-person")
	b.Logf("%d idle people (%d new ones signed in within %s) forgotten: live heap and stacks after GC %d -> %d KiB (%.2f KiB/person), goroutines %d -> %d",
		idle, idle-people, signedIn.Round(time.Second), base.live/1024, live/1024, perPerson, base.goroutines, goroutines)
}

// takeover has a person start a device sign-in through the first replica,
// kills that replica (SIGKILL: its lease stays until it expires) once it
// polls, and measures how long until another replica polls the sign-in
// (goal: auth.DeviceLeaseTTL plus one poll interval).
func (h *hostedBench) takeover(b *testing.B) {
	cs, err := h.connectTo(0, h.token(b, "takeover"))
	if err != nil {
		b.Fatal(err)
	}
	if got, err := callBench(context.Background(), cs, "sign_in_device", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}}); err != nil || got["status"] != "pending" {
		b.Fatalf("sign_in_device = %v, %v", got, err)
	}
	h.waitPoll(b, time.Time{})
	target, _ := url.Parse(strings.TrimSuffix(h.urls[1], "/mcp")) // the agent's documents, from a replica alive
	h.target.Store(target)
	if err := h.procs[0].Process.Kill(); err != nil {
		b.Fatal(err)
	}
	h.procs[0].Wait()
	killed := time.Now()
	took := h.waitPoll(b, killed).Sub(killed)
	b.ReportMetric(took.Seconds(), "takeover-s")
	b.Logf("a device sign-in polled by a killed replica was polled again by another %.1f s after the kill (goal: under the lease's %s plus one poll interval)",
		took.Seconds(), auth.DeviceLeaseTTL)
}

// waitPoll waits until the Company receives a device poll after since,
// and returns when it did.
func (h *hostedBench) waitPoll(b *testing.B, since time.Time) time.Time {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, r := range h.srv.Requests() {
			if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "device_code") && r.Time.After(since) {
				return r.Time
			}
		}
	}
	b.Fatalf("no device poll after %s", since.Format(time.RFC3339Nano))
	return time.Time{}
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
			"--auth-issuer", h.idp.Issuer(), "--resolve", h.idp.Host() + ":443:" + h.idp.Addr(), "--metrics-addr", "127.0.0.1:0", "--evict-idle", benchEvictIdle.String()}, append(store, resolve...)...)
		cmd, u, logged := startProcess(b, env, args...)
		m := metricsURL.FindStringSubmatch(logged.String())
		if m == nil {
			b.Fatalf("no metrics URL logged: %s", logged.String())
		}
		h.procs, h.urls, h.debug = append(h.procs, cmd), append(h.urls, u), append(h.debug, strings.TrimSuffix(m[1], app.MetricsPath))
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
	return h.connectTo(int(h.next.Add(1))%len(h.urls), token)
}

// connectTo connects a go-sdk client at 2026-07-28 through replica i.
func (h *hostedBench) connectTo(i int, token string) (*sdk.ClientSession, error) {
	u := h.urls[i]
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
	for _, cmd := range h.procs {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
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
