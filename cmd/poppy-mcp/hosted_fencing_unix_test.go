//go:build unix

package main

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostedPausedPollerWritesNothing: the fencing of leases (the store
// package's documentation; docs/architecture.md, "Replicas"). Two replicas
// on one PostgreSQL database; dana starts a device sign-in through replica
// A, which polls it under its lease. A is paused (SIGSTOP, as a long GC pause or a stalled
// VM would), so it renews nothing; once its lease has expired, replica B
// takes the polling over, dana approves, and B finishes the sign-in. Then
// A wakes (SIGCONT) still believing it polls: it sends the Company no
// further poll, leaves the kept sign-in in the store as B wrote it, and
// logs that it lost the lease. Without fencing, A's next poll answered
// invalid_grant and A wrote "failed" over B's "complete".
func TestHostedPausedPollerWritesNothing(t *testing.T) {
	t.Parallel()
	h, dbURL, code := signInPolledByA(t)
	a := h.replicas[0]
	pid := a.proc.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	woken := false
	t.Cleanup(func() {
		if !woken {
			syscall.Kill(pid, syscall.SIGCONT) // so the deployment can stop
		}
	})
	if err := h.srv.ApproveDevice(code, "acct_dana", "poppy:read"); err != nil {
		t.Fatal(err)
	}
	danaB := h.connectPerson(t, 1, "dana", "acct_dana", "2026-07-28")
	var st map[string]any
	waitFor(t, 60*time.Second, "completed sign-in through B", func() bool {
		st, _ = danaB.call(t, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 10})
		return st["status"] != "pending"
	})
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status through B = %v\n%s", st, h.logged())
	}
	finished, kept := len(h.srv.Requests()), keptSignIn(t, dbURL)

	woken = true
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "A to say it lost the lease", func() bool {
		return strings.Contains(a.logged.String(), "lost the lease")
	})
	// A's renewal and its next poll were both due when it woke; give the
	// one it runs second time to run too.
	time.Sleep(2 * time.Second)
	for _, r := range h.srv.Requests()[finished:] {
		if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "device_code") {
			t.Errorf("a device poll at %s, after B finished the sign-in", r.Time.Format(time.RFC3339Nano))
		}
	}
	if now := keptSignIn(t, dbURL); !bytes.Equal(now, kept) {
		t.Errorf("the kept sign-in was written after A woke\n%s", a.logged.String())
	}
	if st, _ := danaB.call(t, "sign_in_status", map[string]any{"domain": "example.com"}); st["status"] != "complete" {
		t.Errorf("sign_in_status through B after A woke = %v", st)
	}
}

// keptSignIn is the sealed record of the one device sign-in kept in the
// database at dbURL: any write, even of the same content, changes it (a
// new nonce).
func keptSignIn(t *testing.T, dbURL string) []byte {
	t.Helper()
	var v []byte
	if err := openPostgres(t, dbURL).QueryRow(`SELECT value FROM secrets WHERE name LIKE 'signin/device/%'`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
