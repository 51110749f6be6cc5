package main

// What each person of TestChaosHosted does: a Device Sign-In, approved at
// the Company as their account, then calls at random with a think time
// between them: messages to the Company Agent, reads of its answers, the
// Company's API, and a second sign-in for more scopes.

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"
)

const chaosDomain = "example.com"

// live runs the person until stop. People arrive over the first ten
// seconds, as they would not all at once.
func (p *chaosPerson) live(ctx context.Context, stop time.Time) {
	time.Sleep(time.Duration(p.rng.Int64N(int64(10 * time.Second))))
	p.signIn(ctx, "poppy:read")
	for time.Now().Before(stop) {
		time.Sleep(time.Second + time.Duration(p.rng.Int64N(int64(2*time.Second))))
		switch n := p.rng.IntN(100); {
		case n < 35 || p.conv == "":
			p.send(ctx)
		case n < 65:
			p.read(ctx)
		case n < 94 || len(p.signIns) > 1:
			p.callAPI(ctx)
		default:
			p.signIn(ctx, "poppy:read", "poppy:write")
		}
	}
	if p.cs != nil {
		p.cs.Close()
		p.cs = nil
	}
}

// send sends a new message, to a new conversation now and then, and after
// an error sends the same text again, as a person would, up to four times.
// poppy-mcp gives the same content to the same target the same message ID
// while it is pending (conversation/pending.go), so the Company records
// it once.
func (p *chaosPerson) send(ctx context.Context) {
	p.seq++
	m := &chaosMessage{text: fmt.Sprintf("%s message %d: where is my order?", chaosMarker(p.i), p.seq)}
	if p.conv != "" && p.rng.IntN(100) >= 15 {
		m.conv = p.conv
	}
	p.sent = append(p.sent, m)
	wait := p.rng.IntN(3)
	args := map[string]any{"domain": chaosDomain, "text": m.text, "wait_seconds": wait}
	if m.conv != "" {
		args["conversation_id"] = m.conv
	}
	for m.attempts < 4 && !m.confirmed {
		if m.attempts++; m.attempts > 1 {
			time.Sleep(time.Second)
		}
		got, isErr, err := p.call(ctx, "send_message", args, time.Duration(wait)*time.Second)
		switch {
		case err != nil:
			m.failure = transportCause(err)
		case isErr:
			m.failure, _ = got["error"].(string)
		default:
			m.confirmed, m.failure = true, ""
			if id, _ := got["conversation_id"].(string); m.conv == "" && id != "" {
				p.conv = id
			}
		}
		m.history = append(m.history, fmt.Sprintf("%s after %d transport failures %v", cmp.Or(m.failure, "ok"), len(p.failed), p.failed))
		p.noteResent(got)
	}
}

// read reads the events of the conversation, waiting up to three seconds.
func (p *chaosPerson) read(ctx context.Context) {
	wait := p.rng.IntN(4)
	got, _, _ := p.call(ctx, "read_events", map[string]any{"domain": chaosDomain, "conversation_id": p.conv, "wait_seconds": wait},
		time.Duration(wait)*time.Second)
	p.noteResent(got)
}

// noteResent records what poppy-mcp said became of messages an earlier
// call left pending: one it says it delivered must be at the Company.
func (p *chaosPerson) noteResent(got map[string]any) {
	resent, _ := got["resent"].([]any)
	for _, r := range resent {
		r, _ := r.(map[string]any)
		outcome, _ := r["outcome"].(string)
		p.c.stats.count("resent", outcome, "")
		text, _ := r["text"].(string)
		for _, m := range p.sent {
			if outcome == "delivered" && strings.Contains(text, m.text) {
				m.resentDelivered = true
			}
		}
	}
}

// callAPI lists the person's orders through call_api. Once they are
// signed in the answer must hold their order; the scan of every result
// (saw) finds anyone else's.
func (p *chaosPerson) callAPI(ctx context.Context) {
	got, isErr, err := p.call(ctx, "call_api", map[string]any{"domain": chaosDomain, "operation": "listOrders"}, 0)
	if err != nil || isErr || !p.signedIn() {
		return
	}
	if !strings.Contains(fmt.Sprint(got), "ord_"+p.name) {
		p.c.stats.count("call_api", "not their orders", fmt.Sprintf("signed in, but listOrders answered status %v", got["status"]))
	}
}

// signedIn reports whether a sign-in of the person completed.
func (p *chaosPerson) signedIn() bool {
	for _, si := range p.signIns {
		if si.outcome == "complete" {
			return true
		}
	}
	return false
}

// signIn runs a Device Sign-In for scopes: sign_in_device (again after a
// failure, up to three times), approval at the Company as the person's
// account, then sign_in_status until it is no longer pending, for at
// most 90 seconds.
func (p *chaosPerson) signIn(ctx context.Context, scopes ...string) {
	si := &chaosSignIn{scopes: scopes, outcome: "not started"}
	p.signIns = append(p.signIns, si)
	start := time.Now()
	defer func() { si.took = time.Since(start) }()
	if !p.startSignIn(ctx, si) {
		return
	}
	if err := p.c.srv.ApproveDevice(si.userCode, chaosAccount(p.i), scopes...); err != nil {
		si.outcome, si.cause = "not approved", err.Error()
		return
	}
	si.outcome = "pending"
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		got, isErr, err := p.call(ctx, "sign_in_status", map[string]any{"domain": chaosDomain, "wait_seconds": 10}, 10*time.Second)
		st, _ := got["status"].(string)
		if st != "" && (len(si.statuses) == 0 || si.statuses[len(si.statuses)-1] != st) {
			si.statuses = append(si.statuses, st)
		}
		switch {
		case err != nil:
			si.cause = transportCause(err)
		case st != "pending" && st != "": // complete, or denied, expired, failed (an error result): the person is told
			si.outcome = st
			return
		case isErr:
			si.cause, _ = got["error"].(string)
			time.Sleep(time.Second)
		}
	}
}

// startSignIn calls sign_in_device until it gives a user code (or says a
// held Account Token covered the scopes), at most three times.
func (p *chaosPerson) startSignIn(ctx context.Context, si *chaosSignIn) bool {
	for range 3 {
		got, isErr, err := p.call(ctx, "sign_in_device", map[string]any{"domain": chaosDomain, "scopes": si.scopes}, 0)
		switch {
		case err != nil:
			si.cause = transportCause(err)
		case isErr:
			si.cause, _ = got["error"].(string)
			time.Sleep(time.Second)
		case got["status"] == "complete":
			si.outcome = "complete"
			return false
		default:
			si.userCode, _ = got["user_code"].(string)
			if si.userCode != "" {
				return true
			}
			si.cause = fmt.Sprintf("sign_in_device answered %v", got)
		}
	}
	return false
}
