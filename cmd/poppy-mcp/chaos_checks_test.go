package main

// The end of TestChaosHosted: its figures, and the checks, each from the
// Company's records (poppytest's device requests, conversations, messages
// and protocol violations) and the people's (what each was told and saw),
// and the replicas' exit statuses and logs. The run passes only when
// every check holds.

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// check prints the figures and the checks, and fails the test unless
// every check holds.
func (c *chaosRun) check() {
	c.figures()
	for _, chk := range []struct {
		name string
		run  func() []string
	}{
		{"every sign-in started finished or was reported failed to its person", c.checkSignIns},
		{"every message sent is at the Company exactly once", c.checkMessages},
		{"no person saw another's data", c.checkApart},
		{"no replica ended but those killed (no panic, no unexpected exit, exit 0 on SIGTERM)", c.checkReplicas},
		{"the Company recorded no protocol violation (poppytest also fails the test on each)", c.srv.Violations},
	} {
		problems := chk.run()
		verdict := "PASS"
		if len(problems) > 0 {
			verdict = "FAIL"
			c.t.Fail()
		}
		c.report("CHECK %s: %s (%d problems)", verdict, chk.name, len(problems))
		for i, p := range problems {
			if i == 20 {
				c.report("    ... and %d more", len(problems)-i)
				break
			}
			c.report("    - %s", p)
		}
	}
}

// figures prints what the people did and what the chaos loop did.
func (c *chaosRun) figures() {
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	revs := map[string]int{}
	for _, p := range c.people {
		revs[p.rev]++
	}
	c.report("people: %d (%v); 2025-11-25 sessions %s", len(c.people), revs, c.legacy)
	c.report("faults: %d kills, %d pauses, %d restarts (%d failed), %d PostgreSQL restarts",
		s.faults["kill"], s.faults["pause"], s.faults["restart"], s.faults["restart failed"], s.faults["postgres restart"])
	for _, op := range slices.Sorted(maps.Keys(s.ops)) {
		c.report("operations %-16s %v", op, s.ops[op])
	}
	causes := slices.SortedFunc(maps.Keys(s.causes), func(a, b string) int { return cmp.Compare(s.causes[b], s.causes[a]) })
	c.report("failures by cause (%d causes):", len(causes))
	for _, k := range causes {
		c.report("  %6d  %s", s.causes[k], k)
		if t := s.texts[k]; t != "" && strings.Contains(k, ": tool error: ") {
			c.report("          e.g. %s", shorten(strings.Join(strings.Fields(t), " ")))
		}
	}
}

// checkSignIns: from the people's side, no sign-in is still pending after
// its approval (each ended complete, or its person was told denied,
// expired, failed, or that it could not start); from the Company's, every
// sign-in a person was told complete got its tokens, and every device
// request approved gave them or was reported failed.
func (c *chaosRun) checkSignIns() []string {
	byCode, problems := c.peopleSignIns()
	problems = append(problems, c.companySignIns(byCode)...)
	signedOut, calls := 0, 0
	for _, p := range c.people {
		if p.signedOut > 0 {
			signedOut, calls = signedOut+1, calls+p.signedOut
		}
	}
	c.report("sign-ins: %d people told a sign-in of theirs was complete were later answered sign_in_required (%d calls)", signedOut, calls)
	return problems
}

// peopleSignIns checks the people's side: no sign-in still pending after
// its approval. It returns the sign-ins by user code.
func (c *chaosRun) peopleSignIns() (map[string]*chaosSignIn, []string) {
	var problems []string
	outcomes := map[string]int{}
	byCode := map[string]*chaosSignIn{}
	var took []time.Duration
	started := 0
	for _, p := range c.people {
		for _, si := range p.signIns {
			started++
			outcomes[si.outcome]++
			if si.userCode != "" {
				byCode[si.userCode] = si
			}
			if si.outcome == "complete" {
				took = append(took, si.took)
			}
			if si.outcome == "pending" || si.outcome == "not approved" {
				problems = append(problems, fmt.Sprintf("%s's sign-in for %v (user code %s) is %s %.0f s on (statuses %v; last failure %q)",
					p.name, si.scopes, si.userCode, si.outcome, si.took.Seconds(), si.statuses, si.cause))
			}
		}
	}
	slices.Sort(took)
	c.report("sign-ins: %d started by people %v; time to complete p50 %s max %s", started, outcomes, quantile(took, 50), quantile(took, 100))
	return byCode, problems
}

// companySignIns checks the Company's side: every sign-in a person was
// told complete got its tokens there.
func (c *chaosRun) companySignIns(byCode map[string]*chaosSignIn) []string {
	var problems []string
	orphans, approvedUnredeemed, toldFailed := 0, 0, 0
	for _, d := range c.srv.DeviceRequests() {
		si := byCode[d.UserCode]
		switch {
		case si == nil:
			orphans++ // its sign_in_device answer was lost: the person was told the call failed
		case si.outcome == "complete" && !(d.Status == "approved" && d.Final):
			problems = append(problems, fmt.Sprintf("user code %s: the person was told complete, the Company's request is %s (final %v)", d.UserCode, d.Status, d.Final))
		case d.Status == "approved" && !d.Final:
			approvedUnredeemed++
		case d.Status == "approved" && si.outcome != "complete":
			toldFailed++
			if toldFailed <= 3 {
				c.report("sign-in %s: the Company gave its tokens, its person was told %s (statuses %v)", d.UserCode, si.outcome, si.statuses)
			}
		}
	}
	c.report("sign-ins at the Company: %d device requests no person got a user code of (the answer lost to a fault); %d approved but never redeemed; "+
		"%d whose tokens the Company gave while its person was told the sign-in failed", orphans, approvedUnredeemed, toldFailed)
	return problems
}

// quantile is the q-th percentile of sorted ds, rounded to 0.1 s.
func quantile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*q/100)].Round(100 * time.Millisecond)
}

// checkMessages: each message a person was told was sent (a send_message
// result, or a later resent "delivered") is at the Company once; no
// message is there twice; the Company has no message no one sent.
func (c *chaosRun) checkMessages() []string {
	copies := c.companyCopies()
	var problems []string
	var confirmed, unconfirmedThere, unconfirmedMissing, retried int
	sent := map[string]bool{}
	for _, p := range c.people {
		for _, m := range p.sent {
			sent[m.text] = true
			n := len(copies[m.text])
			if m.sentAgain() {
				retried++
			}
			switch told := m.confirmed || m.resentDelivered; {
			case n > 1:
				problems = append(problems, fmt.Sprintf("%q is at the Company %d times: %v; its person's send_message calls: %v (told sent %v)",
					m.text, n, copies[m.text], m.history, told))
			case told && n == 0:
				problems = append(problems, fmt.Sprintf("%q: its person was told it was sent, the Company never got it", m.text))
			case told:
				confirmed++
			case n == 1:
				unconfirmedThere++
			default:
				unconfirmedMissing++
			}
		}
	}
	own, unsent := unsentCopies(copies, sent)
	problems = append(problems, unsent...)
	c.report("messages: %d sent by people (%d sent again after a failure); %d confirmed to their person and at the Company once; "+
		"not confirmed (the person was told it failed): %d at the Company once, %d not there; %d more poppy-mcp sent on its own",
		len(sent), retried, confirmed, unconfirmedThere, unconfirmedMissing, own)
	return problems
}

// unsentCopies counts the messages at the Company that poppy-mcp sent on
// its own (no person's marker: its "signed in now, please continue" after
// answering an authorization event itself), and names those with a
// person's marker that no person sent.
func unsentCopies(copies map[string][]string, sent map[string]bool) (int, []string) {
	own := 0
	var problems []string
	for text, at := range copies {
		switch {
		case !markers.MatchString(text):
			own += len(at)
		case !sent[text]:
			problems = append(problems, fmt.Sprintf("the Company has messages %q no person sent: %v", text, at))
		}
	}
	return own, problems
}

// companyCopies are the messages of the Personal Agent the Company holds:
// each text's copies, as "conversation/message ID at time".
func (c *chaosRun) companyCopies() map[string][]string {
	copies := map[string][]string{}
	for _, cv := range c.srv.Conversations() {
		for _, m := range c.srv.Messages(cv.ID) {
			copies[m.Text] = append(copies[m.Text], fmt.Sprintf("%s/%s at %s", cv.ID, m.ID, m.Time.UTC().Format("15:04:05.000")))
		}
	}
	return copies
}

// checkApart: no person's results showed another person's marker, account
// or order; no conversation ID reached two people; at the Company, each
// conversation holds one person's messages and belongs to their account
// alone, and each User is one person.
func (c *chaosRun) checkApart() []string {
	var problems []string
	owners := map[string][]string{}
	for _, p := range c.people {
		problems = append(problems, p.leaks...)
		for id := range p.convs {
			owners[id] = append(owners[id], p.name)
		}
	}
	for id, names := range owners {
		if len(names) > 1 {
			problems = append(problems, fmt.Sprintf("conversation %s reached %v", id, names))
		}
	}
	return append(problems, c.companyApart()...)
}

// companyApart checks the Company's conversations: one person's messages
// in each, on their account, under a User of theirs alone.
func (c *chaosRun) companyApart() []string {
	var problems []string
	users := map[string]string{} // User ID -> person
	for _, cv := range c.srv.Conversations() {
		who := map[string]bool{}
		for _, m := range c.srv.Messages(cv.ID) {
			for _, mk := range markers.FindAllStringSubmatch(m.Text, -1) {
				who[mk[1]] = true
			}
		}
		if len(who) != 1 {
			problems = append(problems, fmt.Sprintf("the Company's conversation %s holds the messages of %v", cv.ID, slices.Sorted(maps.Keys(who))))
			continue
		}
		name := slices.Collect(maps.Keys(who))[0]
		if cv.Account != "" && cv.Account != "acct_"+name {
			problems = append(problems, fmt.Sprintf("%s's conversation %s is on account %s", name, cv.ID, cv.Account))
		}
		if prev, ok := users[cv.UserID]; ok && prev != name {
			problems = append(problems, fmt.Sprintf("User %s at the Company is both %s and %s", cv.UserID, prev, name))
		}
		users[cv.UserID] = name
	}
	return problems
}

// fatal matches what a Go program writes when it crashes, and the race
// detector's reports.
var fatal = regexp.MustCompile(`(?m)^(panic: |fatal error: |WARNING: DATA RACE)`)

// checkReplicas: each process ended only when the chaos loop killed it;
// none wrote a panic or a fatal error; each still running ends with exit
// status 0 on SIGTERM.
func (c *chaosRun) checkReplicas() []string {
	var problems []string
	for _, r := range c.replicas {
		for i, p := range r.procs {
			if p.exited() && !p.killed.Load() {
				problems = append(problems, fmt.Sprintf("replica %s's process %d (pid %d) exited by itself: %v; its log ends:\n%s", r.name, i+1, p.cmd.Process.Pid, p.cmd.ProcessState, tail(p.log.String(), 15)))
			}
		}
	}
	defer c.saveLogs()
	for _, r := range c.replicas {
		problems = append(problems, c.terminate(r)...)
		for i, p := range r.procs {
			if loc := fatal.FindStringIndex(p.log.String()); loc != nil {
				problems = append(problems, fmt.Sprintf("replica %s's process %d crashed:\n%s", r.name, i+1, excerpt(p.log.String(), loc[0], 20)))
			}
		}
	}
	return problems
}

// terminate sends SIGTERM to r's running process and checks it ends with
// exit status 0 within 30 s.
func (c *chaosRun) terminate(r *chaosReplica) []string {
	p := r.current()
	if p.exited() {
		return nil
	}
	p.termed.Store(true)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		return []string{fmt.Sprintf("replica %s did not end within 30 s of SIGTERM", r.name)}
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		return []string{fmt.Sprintf("replica %s ended with %v on SIGTERM; its log ends:\n%s", r.name, p.cmd.ProcessState, tail(p.log.String(), 15))}
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// excerpt is n lines of s from the line holding offset at.
func excerpt(s string, at, n int) string {
	start := strings.LastIndexByte(s[:at], '\n') + 1
	lines := strings.SplitN(s[start:], "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// saveLogs writes every replica process's log to POPPY_CHAOS_LOGDIR, when
// set, as A-1.log and so on, for a look at what a failed check found.
func (c *chaosRun) saveLogs() {
	dir := os.Getenv("POPPY_CHAOS_LOGDIR")
	if dir == "" {
		return
	}
	for _, r := range c.replicas {
		for i, p := range r.procs {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", r.name, i+1)), []byte(p.log.String()), 0o644); err != nil {
				c.report("saving a log: %v", err)
			}
		}
	}
	c.report("the replicas' logs are in %s", dir)
}
