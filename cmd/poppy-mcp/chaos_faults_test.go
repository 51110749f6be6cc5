package main

// The chaos of TestChaosHosted: while the people work, a loop kills
// (SIGKILL) a replica and restarts it a few seconds later, or pauses one
// (SIGSTOP) and lets it go on (SIGCONT), one replica at a time, and halfway
// through restarts PostgreSQL (a fast shutdown: every connection drops).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// run lets the people work for d under chaos, then lets the deployment
// settle: every replica up, and each person's one more call, which sends
// again what poppy-mcp still holds pending.
func (c *chaosRun) run(d time.Duration) {
	ctx := context.Background()
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for _, p := range c.people {
		wg.Go(func() { p.live(ctx, stop) })
	}
	c.chaosLoop(stop)
	wg.Wait()
	c.report("people stopped %.0f s after the start (the last calls and sign-ins in flight ended)", time.Since(start).Seconds())
	c.settle(ctx)
}

// chaosLoop disturbs one replica at a time until stop is 10 s away, and
// restarts PostgreSQL once, halfway. Every replica is up when it returns.
func (c *chaosRun) chaosLoop(stop time.Time) {
	rng := rand.New(rand.NewPCG(27, 6))
	half := time.Now().Add(time.Until(stop) / 2)
	time.Sleep(5 * time.Second) // the first people arrive
	restarted := false
	for kills := true; time.Until(stop) > 10*time.Second; kills = !kills {
		if !restarted && time.Now().After(half) {
			c.restartPostgres()
			restarted = true
		}
		r := c.replicas[rng.IntN(len(c.replicas))]
		if kills {
			c.kill(r, time.Duration(2+rng.IntN(4))*time.Second)
		} else {
			c.pause(r, time.Duration(3+rng.IntN(13))*time.Second)
		}
		time.Sleep(time.Duration(3+rng.IntN(5)) * time.Second)
	}
	if !restarted {
		c.restartPostgres()
	}
}

// kill kills r's process, leaves it out of the balancer for down, then
// starts it again on the same state.
func (c *chaosRun) kill(r *chaosReplica, down time.Duration) {
	c.signal(r, syscall.SIGKILL)
	c.mu.Lock()
	r.down = true
	p := r.current()
	c.mu.Unlock()
	<-p.done
	c.stats.fault("kill")
	c.report("%s killed replica %s, down for %s", clock(), r.name, down)
	time.Sleep(down)
	for attempt := range 3 {
		err := c.startReplica(r)
		if err == nil {
			c.stats.fault("restart")
			return
		}
		c.stats.fault("restart failed")
		c.report("%s replica %s did not restart (attempt %d): %s", clock(), r.name, attempt+1, shorten(err.Error()))
	}
	c.t.Errorf("replica %s did not restart after it was killed", r.name)
}

// pause stops r's process for d, then lets it go on; the balancer keeps
// sending it requests meanwhile.
func (c *chaosRun) pause(r *chaosReplica, d time.Duration) {
	c.signal(r, syscall.SIGSTOP)
	c.mu.Lock()
	r.paused = true
	c.mu.Unlock()
	c.stats.fault("pause")
	c.report("%s paused replica %s for %s", clock(), r.name, d)
	time.Sleep(d)
	c.signal(r, syscall.SIGCONT)
	c.mu.Lock()
	r.paused = false
	c.mu.Unlock()
}

// restartPostgres restarts the run's PostgreSQL cluster
// (scripts/pg-test-server.sh restart).
func (c *chaosRun) restartPostgres() {
	start := time.Now()
	out, err := exec.Command("bash", "../../scripts/pg-test-server.sh", "restart", c.dsn).CombinedOutput()
	if err != nil {
		c.t.Errorf("restarting PostgreSQL: %v\n%s", err, out)
		return
	}
	c.stats.fault("postgres restart")
	c.report("%s restarted PostgreSQL in %.1f s", clock(), time.Since(start).Seconds())
}

// clock is the time of day, for the report's lines.
func clock() string { return time.Now().UTC().Format("15:04:05") }

// settle waits for the pending messages' leases of killed replicas to run
// out (conversation.pendingLeaseTTL, 10 s), then has each person with a
// conversation read it once more: the call on which poppy-mcp sends again
// what it holds pending for them, if no background worker did.
func (c *chaosRun) settle(ctx context.Context) {
	time.Sleep(12 * time.Second)
	var wg sync.WaitGroup
	work := make(chan *chaosPerson)
	for range 20 {
		wg.Go(func() {
			for p := range work {
				if p.conv != "" {
					p.read(ctx)
				}
				if p.cs != nil {
					p.cs.Close()
					p.cs = nil
				}
			}
		})
	}
	for _, p := range c.people {
		work <- p
	}
	close(work)
	wg.Wait()
	time.Sleep(3 * time.Second) // Company Agent turns still due
}

// probeSessions finds out whether an MCP session at 2025-11-25 keeps
// working when its requests land on other replicas (issue 27 part 5): a
// session through the round-robin balancer lists its tools six times.
// When it does, every fifth person uses 2025-11-25; when not, everyone
// uses 2026-07-28, whose requests stand alone, and the report says why.
func (c *chaosRun) probeSessions() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := &chaosPerson{c: c, name: "probe", token: c.people[0].token, rev: "2025-11-25"}
	err := p.connect(ctx)
	session := ""
	for i := 0; err == nil && i < 6; i++ { // calls, not tools/list, which the client caches
		session = p.cs.ID()
		var res *sdk.CallToolResult
		if res, err = p.cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_conversations", Arguments: map[string]any{}}); err == nil && res.IsError {
			err = fmt.Errorf("list_conversations: %s", toolCause(nil, res))
		}
	}
	if p.cs != nil {
		p.cs.Close()
	}
	if err != nil {
		c.legacy = fmt.Sprintf("not working across replicas (session ID %q), so every person uses 2026-07-28: %s", session, shorten(err.Error()))
		c.report("2025-11-25 sessions: %s", c.legacy)
		return
	}
	c.legacy = fmt.Sprintf("working across replicas (session ID %q, six calls through the round robin): every fifth person uses 2025-11-25", session)
	for i, p := range c.people {
		if i%5 == 4 {
			p.rev = "2025-11-25"
		}
	}
	c.report("2025-11-25 sessions: %s", c.legacy)
}
