package main

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHostedSignInTakenOverAfterKill: a hosted deployment of two replicas
// on one PostgreSQL database. dana starts a device sign-in through replica
// A, which polls it under its lease (auth.DeviceLeaseTTL); A is killed
// (SIGKILL: it gives nothing back, its lease stays in the database until
// it expires). dana approves at the Company; replica B takes the polling
// over only once A's lease has run out, for dana (her Session, her
// Account Token), and dana's client, now on B, reads the sign-in complete
// and calls the Company's API as her account. tools' TestDeviceSignInTakenOver
// and TestSignInTakenOverForItsPerson close the first replica, which hands
// its lease back; cmd/poppy-mcp's TestReplicasFailover kills a replica of
// a deployment serving no one in particular.
func TestHostedSignInTakenOverAfterKill(t *testing.T) {
	t.Parallel()
	h, dbURL, code := signInPolledByA(t)
	a := h.replicas[0]
	a.down.Store(true)
	if err := a.proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.proc.Wait()
	expires := deviceLeaseExpiry(t, dbURL) // A's last renewal, which nothing gives back
	killed := len(h.srv.Requests())
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
	checkPolledAfter(t, h, killed, expires)
	if !strings.Contains(h.replicas[1].logged.String(), "taking over a device sign-in no replica polls") {
		t.Errorf("B did not say it took the sign-in over:\n%s", h.replicas[1].logged.String())
	}
	if orders, isErr := danaB.call(t, "call_api", map[string]any{"domain": "example.com", "operation": "listOrders"}); isErr ||
		!strings.Contains(fmt.Sprint(orders), "Stormline jacket, size M") {
		t.Errorf("dana's call_api through B after the takeover: %v (error %v), want her orders", orders, isErr)
	}
	for _, s := range h.srv.SignedInSessions() {
		if s.Account != "acct_dana" {
			t.Errorf("a Session signed in to %s, not dana's account", s.Account)
		}
	}
}

// signInPolledByA starts a hosted deployment of two replicas on one
// PostgreSQL database, and a device sign-in of dana's through replica A,
// and waits for A's first poll. It returns the deployment, the database's
// URL and the sign-in's user code.
func signInPolledByA(t *testing.T) (h *hostedDeployment, dbURL, code string) {
	t.Helper()
	dbURL = postgresURL(t)
	h = startHostedWith(t, &deploymentOptions{Replicas: 2, Store: dbURL})
	dana := h.connectPerson(t, 0, "dana", "acct_dana", "2026-07-28")
	got, _ := dana.call(t, "sign_in_device", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	code, _ = got["user_code"].(string)
	if got["status"] != "pending" || code == "" {
		t.Fatalf("sign_in_device through A = %v\n%s", got, h.logged())
	}
	waitFor(t, 20*time.Second, "poll by A", func() bool { return devicePolls(h.srv) > 0 })
	return h, dbURL, code
}

// checkPolledAfter: the Company got device polls after the kill (the
// first killed requests were before it), every one of them no sooner than
// expires, when the killed replica's lease ran out.
func checkPolledAfter(t *testing.T, h *hostedDeployment, killed int, expires time.Time) {
	t.Helper()
	polls := 0
	for _, r := range h.srv.Requests()[killed:] {
		if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "device_code") {
			polls++
			if r.Time.Before(expires) {
				t.Errorf("a device poll at %s, before the killed replica's lease expired at %s", r.Time.Format(time.RFC3339Nano), expires.Format(time.RFC3339Nano))
			}
		}
	}
	if polls == 0 {
		t.Errorf("B reported the sign-in complete without polling\n%s", h.logged())
	}
}

// deviceLeaseExpiry is when the one device sign-in lease in the database
// at dbURL ends unless renewed, by the database's clock.
func deviceLeaseExpiry(t *testing.T, dbURL string) time.Time {
	t.Helper()
	var ns int64
	err := openPostgres(t, dbURL).QueryRow(`SELECT expires_at FROM leases WHERE name LIKE 'device-signin %'`).Scan(&ns)
	if err == sql.ErrNoRows {
		t.Fatal("no device sign-in lease in the database while A polls")
	} else if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns)
}
