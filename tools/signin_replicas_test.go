package tools_test

import (
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
)

// The tests of this file run two tools Servers over one store, as two
// replicas share one database; cmd/poppy-mcp's TestReplicasFailover does
// the same with real processes on PostgreSQL and a SIGKILL.

// TestDeviceSignInReadElsewhere: a device sign-in started through one
// replica is read through another while the first polls it, and once the
// user approves, the other replica reports it complete and its Session is
// signed in; sign_in_device through the other replica offers the same
// code rather than a second sign-in. On the old code the second replica
// knew of no sign-in ("no_sign_in").
func TestDeviceSignInReadElsewhere(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T, n *memnet.Network) {
				h := newSignInHarnessOn(t, n, signInOpts(nil))
				a := h.connect(t, rev)
				_, b := h.another(t, rev)
				_, got := startDevice(t, a, "poppy:read")
				res, st := status(t, b, 0)
				if res.IsError || st["status"] != "pending" || st["user_code"] != got["user_code"] {
					t.Fatalf("through the other replica while pending: %v", st)
				}
				if _, again := startDevice(t, b, "poppy:read"); again["user_code"] != got["user_code"] {
					t.Errorf("sign_in_device through the other replica started a second sign-in: %v", again)
				}
				if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
					t.Fatal(err)
				}
				_, st = status(t, b, 20)
				if st["status"] != "complete" || st["signed_in"] != true {
					t.Fatalf("through the other replica after approval: %v", st)
				}
			})
		})
	}
}

// TestDeviceSignInTakenOver: a replica that stops (here closed, which
// hands its lease back) leaves its device sign-in pending in the store;
// another replica takes the polling over, finishes the sign-in and reports
// it complete. The Company saw polls from the second replica only after
// the first stopped, none too fast (poppytest fails the test otherwise).
// On the old code the sign-in was lost with the replica.
func TestDeviceSignInTakenOver(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, n *memnet.Network) {
		h := newSignInHarnessOn(t, n, signInOpts(nil))
		a := h.connect(t, revisions[0])
		_, got := startDevice(t, a, "poppy:read")
		h.tools.Close()
		before := devicePolls(h)
		_, b := h.another(t, revisions[0])
		if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
			t.Fatal(err)
		}
		_, st := status(t, b, 30)
		if st["status"] != "complete" || st["signed_in"] != true {
			t.Fatalf("after the takeover: %v", st)
		}
		if devicePolls(h) == before {
			t.Error("the second replica finished the sign-in without polling")
		}
	})
}

// TestDeviceSignInTakeoverKeepsSlowDown: a poller that took a sign-in over
// polls no sooner than the interval slow_down raised for the one before it
// (RFC 8628 §3.5: "respect any increase in the polling interval required
// by the "slow_down" error"): poppytest reports a poll that ignores it as
// the agent's bug, which fails this test. It proves the interval is kept in
// the store (auth.PollDeviceFlow).
func TestDeviceSignInTakeoverKeepsSlowDown(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, n *memnet.Network) {
		h := newSignInHarnessOn(t, n, signInOpts(nil))
		h.company.SlowDown(1)
		a := h.connect(t, revisions[0])
		_, got := startDevice(t, a, "poppy:read")
		if _, st := status(t, a, 3); st["status"] != "pending" || devicePolls(h) == 0 {
			t.Fatalf("before the takeover: %v, %d polls", st, devicePolls(h))
		}
		h.tools.Close()
		_, b := h.another(t, revisions[0])
		if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
			t.Fatal(err)
		}
		if _, st := status(t, b, 30); st["status"] != "complete" {
			t.Fatalf("after the takeover: %v", st)
		}
	})
}

// TestDeviceSignInFollowedElsewhere: a replica whose Session with the
// Company is signed out hears that another replica finished a sign-in
// (the store's notification) and signs its Session in with the Account
// Token stored, before anyone asks it for sign_in_status. Without the
// follower its Session stayed signed out.
func TestDeviceSignInFollowedElsewhere(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, n *memnet.Network) {
		h := newSignInHarnessOn(t, n, signInOpts(nil))
		a := h.connect(t, revisions[1])
		_, b := h.another(t, revisions[1])
		if _, got := call(t, b, "start_session", map[string]any{"domain": domain}); got["signed_in"] != false {
			t.Fatalf("start_session through B = %v", got)
		}
		_, got := startDevice(t, a, "poppy:read")
		if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
			t.Fatal(err)
		}
		if _, st := status(t, a, 20); st["status"] != "complete" {
			t.Fatalf("through A: %v", st)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, got := call(t, b, "start_session", map[string]any{"domain": domain})
			if got["signed_in"] == true {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("B's Session is still signed out: %v", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// TestSessionsNotShared: two replicas running at once each use a Session
// of their own (auth.ClaimSession), since two processes renewing one
// Session's token would have the Company refuse each one's token in turn;
// once one replica stops, a replica that starts continues its Session.
// On the old code both continued the same Session.
func TestSessionsNotShared(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	_, a := call(t, h.connect(t, revisions[1]), "start_session", map[string]any{"domain": domain})
	other, b := h.another(t, revisions[1])
	_, got := call(t, b, "start_session", map[string]any{"domain": domain})
	if got["session_id"] == a["session_id"] || got["session_id"] == nil {
		t.Fatalf("both replicas use Session %v", got["session_id"])
	}
	other.Close()
	_, c := h.another(t, revisions[1])
	if _, again := call(t, c, "start_session", map[string]any{"domain": domain}); again["session_id"] != got["session_id"] {
		t.Errorf("after B stopped, a new replica started Session %v, want B's %v continued", again["session_id"], got["session_id"])
	}
}
