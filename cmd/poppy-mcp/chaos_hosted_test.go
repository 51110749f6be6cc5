package main

// TestChaosHosted is the chaos run of a hosted deployment (issue 27, part
// 6; BENCHMARKS.md "Chaos"): three `serve --http --auth-issuer` replicas on
// one PostgreSQL database behind a round-robin reverse proxy, against
// poppytest and a real authorization server (internal/oidctest), while
// POPPY_CHAOS_PEOPLE people (default 200), each with their own access
// token and their own account at the Company, sign in by Device Sign-In,
// talk to the Company Agent (send_message, read_events) and call its API
// (call_api) through the official go-sdk client for POPPY_CHAOS_DURATION
// (default 2m); meanwhile a loop kills (SIGKILL), pauses (SIGSTOP, then
// SIGCONT) and restarts replicas and restarts PostgreSQL once. At the end
// it checks, from the Company's records and the people's: every sign-in
// started finished or was reported failed to its person, every message
// sent is at the Company exactly once, no person saw another's data, no
// replica ended but those killed. Run it with scripts/chaos-hosted.sh
// (which starts the PostgreSQL it restarts); `go test` skips it.

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// chaosReplicas is how many replicas the run has.
const chaosReplicas = 3

func TestChaosHosted(t *testing.T) {
	if os.Getenv("POPPY_CHAOS") != "1" {
		t.Skip("the chaos run: scripts/chaos-hosted.sh (POPPY_CHAOS=1)")
	}
	people, duration := chaosKnobs(t)
	c := startChaos(t, people)
	c.report("# %d replicas on PostgreSQL, %d people, %s of chaos, load average %s", chaosReplicas, people, duration, loadAverage())
	c.probeSessions()
	c.run(duration)
	c.check()
}

// chaosKnobs are the run's size, from POPPY_CHAOS_PEOPLE and
// POPPY_CHAOS_DURATION.
func chaosKnobs(t *testing.T) (int, time.Duration) {
	people, duration := 200, 2*time.Minute
	if v := os.Getenv("POPPY_CHAOS_PEOPLE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 999 {
			t.Fatalf("POPPY_CHAOS_PEOPLE=%q: want 1 to 999", v)
		}
		people = n
	}
	if v := os.Getenv("POPPY_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("POPPY_CHAOS_DURATION=%q: want a duration of 10s or more", v)
		}
		duration = d
	}
	return people, duration
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// chaosRun is the deployment under chaos, its people and what happened.
type chaosRun struct {
	t        *testing.T
	srv      *poppytest.Server
	idp      *oidctest.Provider
	dsn      string   // POPPY_TEST_POSTGRES, the cluster the run restarts
	env      []string // every replica's environment
	args     []string // every replica's serve flags but --state-dir
	proxy    string   // the balancer's MCP URL
	mu       sync.Mutex
	replicas []*chaosReplica
	next     atomic.Int64 // the balancer's round robin
	people   []*chaosPerson
	stats    chaosStats
	legacy   string // how 2025-11-25 sessions fared across replicas (probeSessions)
}

// chaosReplica is one replica: its state directory and every process it
// ran, the current one last. Its fields are guarded by chaosRun.mu.
type chaosReplica struct {
	name   string // A, B, C
	state  string
	procs  []*chaosProc
	down   bool // killed and not restarted yet: the balancer leaves it out, as a health check would
	paused bool
}

// chaosProc is one process of a replica.
type chaosProc struct {
	cmd    *exec.Cmd
	url    string // its MCP URL on loopback
	log    *testlog.Buffer
	done   chan struct{} // closed once it exited
	killed atomic.Bool   // the chaos loop sent it SIGKILL
	termed atomic.Bool   // the end of the run sent it SIGTERM
}

// current is the replica's running process.
func (r *chaosReplica) current() *chaosProc { return r.procs[len(r.procs)-1] }

// startChaos starts poppytest with an account and an order per person, the
// authorization server, the replicas and the balancer.
func startChaos(t *testing.T, people int) *chaosRun {
	c := &chaosRun{t: t, dsn: os.Getenv("POPPY_TEST_POSTGRES")}
	if !strings.Contains(c.dsn, "poppy-pg.") {
		t.Fatal("POPPY_TEST_POSTGRES must name a cluster of scripts/pg-test-server.sh, which the run restarts")
	}
	c.srv = poppytest.NewServer(t, &poppytest.Options{Accounts: chaosAccounts(people), DeviceInterval: time.Second})
	for i := range people {
		if err := c.srv.AddOrder(chaosOrder(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.idp = oidctest.New(t, &oidctest.Options{TokenLifetime: time.Hour})
	public := "https://" + c.srv.AgentHost()
	c.idp.AddClient(oidctest.Client{ID: "claude", RedirectURIs: []string{"https://client.test/cb"}, Audience: []string{public + "/mcp"}})
	c.configure(t, public, postgresURL(t))
	for i := range chaosReplicas {
		r := &chaosReplica{name: string(rune('A' + i)), state: t.TempDir()}
		c.replicas = append(c.replicas, r)
		if err := c.startReplica(r); err != nil {
			t.Fatal(err)
		}
	}
	c.startProxy(t)
	t.Cleanup(c.stopAll)
	for i := range people {
		c.people = append(c.people, newChaosPerson(c, i))
	}
	return c
}

// configure makes the replicas' environment and flags and initializes the
// deployment's state in the database at dbURL.
func (c *chaosRun) configure(t *testing.T, public, dbURL string) {
	_, resolve := companyArgs(t, c.srv)
	ca := filepath.Join(t.TempDir(), "cas.pem")
	if err := os.WriteFile(ca, append(c.srv.CAPEM(), c.idp.CAPEM()...), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = []string{"SSL_CERT_FILE=" + ca, "POPPY_STATE_KEY=" + newKey(), "GOTRACEBACK=all"}
	if _, errOut, code := runBinary(t, c.env, "init", "--out", t.TempDir(), "--client-id", public+"/agent.json",
		"--state-dir", t.TempDir(), "--store", dbURL); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	c.args = append([]string{"serve", "--http", "127.0.0.1:0", "--public-url", public, "--store", dbURL,
		"--auth-issuer", c.idp.Issuer(), "--resolve", c.idp.Host() + ":443:" + c.idp.Addr()}, resolve...)
}

// chaosAccounts are the Company's accounts, one per person.
func chaosAccounts(people int) []poppytest.Account {
	out := make([]poppytest.Account, people)
	for i := range out {
		out[i] = poppytest.Account{ID: chaosAccount(i), Email: chaosName(i) + "@example.com", Password: "chaos-password-" + chaosName(i)}
	}
	return out
}

// chaosOrder is person i's one order, whose summary carries their marker:
// a result that shows it to anyone else shows another person's data.
func chaosOrder(i int) poppytest.Order {
	return poppytest.Order{ID: "ord_" + chaosName(i), Account: chaosAccount(i), Summary: "Parcel of " + chaosMarker(i),
		Status: poppytest.OrderDelivered, Placed: time.Now().Add(-72 * time.Hour).UTC().Truncate(time.Second),
		Items: []poppytest.Item{{ID: "itm_" + chaosName(i), Name: "Rain hat, one size", SKU: "rain-hat-os", Quantity: 1, Price: 35}}}
}

func chaosName(i int) string    { return fmt.Sprintf("p%03d", i) }
func chaosAccount(i int) string { return "acct_" + chaosName(i) }
func chaosMarker(i int) string  { return "chaos-" + chaosName(i) }

// startReplica starts a new process of r on its state directory and waits
// until it serves.
func (c *chaosRun) startReplica(r *chaosReplica) error {
	p := &chaosProc{log: &testlog.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary, append(c.args, "--state-dir", r.state)...)
	p.cmd.Env = append(os.Environ(), c.env...)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	for deadline := time.Now().Add(60 * time.Second); p.url == ""; time.Sleep(50 * time.Millisecond) {
		if m := servingURL.FindStringSubmatch(p.log.String()); m != nil {
			p.url = strings.TrimSuffix(m[1], "/mcp")
		} else if time.Now().After(deadline) || p.exited() {
			p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("replica %s did not start serving: %s", r.name, p.log.String())
		}
	}
	c.mu.Lock()
	r.procs, r.down = append(r.procs, p), false
	c.mu.Unlock()
	return nil
}

// exited reports whether the process has ended.
func (p *chaosProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startProxy starts the balancer: each request to the next replica that
// is not down, paused ones included (a health check is slower than a
// pause), with no stickiness.
func (c *chaosRun) startProxy(t *testing.T) {
	proxy := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		target, _ := url.Parse(c.pick())
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}, ErrorLog: log.New(io.Discard, "", 0)} // each failure is the person's to count
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: proxy}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	c.proxy = "http://" + ln.Addr().String() + "/mcp"
	c.srv.Handle(c.srv.AgentHost(), "/", http.HandlerFunc(c.documents))
}

// documentClient fetches a published document from a replica; one
// paused longer than its timeout is passed over.
var documentClient = &http.Client{Timeout: 3 * time.Second}

// documents serves the Company's GETs of the agent's published documents
// (agent.json, jwks.json: Poppy 0.1 §4.1) from the replicas as a balancer
// that retries an idempotent request on the next replica does, so that
// the Company's check of a token is not failed by the harness's own
// balancer sending it to a replica killed a moment before. The people's
// MCP requests get no such retry.
func (c *chaosRun) documents(w http.ResponseWriter, r *http.Request) {
	var last error
	for range len(c.replicas) {
		resp, err := documentClient.Get(c.pick() + r.URL.RequestURI())
		if err != nil {
			last = err
			continue
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	http.Error(w, last.Error(), http.StatusBadGateway)
}

// pick is the next replica's URL, or a closed port when every replica is
// down (the balancer then answers 502, as one with no backend does).
func (c *chaosRun) pick() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range c.replicas {
		r := c.replicas[int(c.next.Add(1)-1)%len(c.replicas)]
		if !r.down {
			return r.current().url
		}
	}
	return "http://127.0.0.1:1"
}

// signal sends sig to r's current process.
func (c *chaosRun) signal(r *chaosReplica, sig syscall.Signal) {
	c.mu.Lock()
	p := r.current()
	c.mu.Unlock()
	if sig == syscall.SIGKILL {
		p.killed.Store(true)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.report("signal %v to replica %s: %v", sig, r.name, err)
	}
}

// stopAll ends every process still running, for the test's cleanup.
func (c *chaosRun) stopAll() {
	for _, r := range c.replicas {
		for _, p := range r.procs {
			if !p.exited() {
				p.cmd.Process.Signal(syscall.SIGCONT)
				p.killed.Store(true)
				p.cmd.Process.Kill()
				<-p.done
			}
		}
	}
}

// report prints a line of the run's report (scripts/chaos-hosted.sh shows
// these lines).
func (c *chaosRun) report(format string, args ...any) {
	fmt.Printf("chaos: "+format+"\n", args...)
}
