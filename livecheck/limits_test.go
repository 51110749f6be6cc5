package livecheck_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestHonoursRetryAfter: the token endpoint answers the first request 429
// with Retry-After: 1. The run waits it out and sends the request again:
// poppytest served one 429, reported no request sent before Retry-After
// allowed (Poppy 0.1 §4.3), and the Session started.
func TestHonoursRetryAfter(t *testing.T) {
	srv, rp, c := company(t, nil, nil)
	srv.RateLimit("auth.example.com", "/oauth/token", 1, time.Second)
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil || byID(rep)["session.start"].Status != livecheck.Passed {
		t.Fatalf("Run: %v\n%s", err, dump(rep))
	}
	if n := srv.Served("rate_limited"); n != 1 {
		t.Errorf("Served(rate_limited) = %d, want 1", n)
	}
	for _, v := range rp.violations() {
		if strings.Contains(v, "Retry-After") {
			t.Error(v)
		}
	}
}

// TestRetryAfterTooLong: a hold longer than MaxWait is not waited out:
// the Session cannot start, so the run could not check, and it says why.
func TestRetryAfterTooLong(t *testing.T) {
	srv, _, c := company(t, nil, &livecheck.Options{MaxWait: time.Second})
	srv.RateLimit("auth.example.com", "/oauth/token", 1, time.Hour)
	rep, err := c.Run(context.Background(), "example.com")
	var le *livecheck.Error
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "3600 s") {
		t.Fatalf("Run: %v", err)
	}
	if n := srv.Count("auth.example.com", "/oauth/token"); n != 1 {
		t.Errorf("%d token requests; after the 429 none may be sent", n)
	}
	if ch := byID(rep)["refuse.replayed_jti"]; ch.Status != livecheck.Skipped {
		t.Errorf("a probe ran without a Session: %+v", ch)
	}
}

// TestBound: a run sends at most MaxRequests, the rest skipped as such.
func TestBound(t *testing.T) {
	srv, _, c := company(t, nil, &livecheck.Options{MaxRequests: 12})
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range srv.Requests() {
		if r.Host != srv.AgentHost() {
			seen++
		}
	}
	if seen != 12 || rep.Requests != 12 {
		t.Errorf("the Company saw %d requests, the report says %d; want 12", seen, rep.Requests)
	}
	if last := byID(rep)["signin.revoke_unknown"]; last.Status != livecheck.Skipped || !strings.Contains(last.Message, "spent") {
		t.Errorf("a late probe: %+v", last)
	}
	if !rep.OK() {
		t.Errorf("a spent budget is not an error:\n%s", dump(rep))
	}
}

// TestUnknownClient: a Company that cannot fetch the identity refuses it;
// nothing can be checked, and the error says what the Company must reach.
func TestUnknownClient(t *testing.T) {
	srv := poppytest.NewServer(newReporter(t), nil) // publishes no agent documents
	id, err := auth.NewIdentity(context.Background(), "https://"+srv.AgentHost()+"/agent.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := livecheck.New(id, &livecheck.Options{Transport: srv.Transport()})
	rep, err := c.Run(context.Background(), "example.com")
	var le *livecheck.Error
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), "https://agent.example/agent.json") {
		t.Fatalf("Run: %v", err)
	}
	if ch := byID(rep)["session.start"]; ch.Status != livecheck.Failed {
		t.Errorf("session.start: %+v", ch)
	}
}

// TestUnusable: a Company whose documents block use is not probed.
func TestUnusable(t *testing.T) {
	srv, _, c := company(t, &poppytest.Options{Metadata: func(m map[string]any) { m["poppy_domains"] = []any{"example.org"} }}, nil)
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil || rep.Usable || rep.OK() || len(rep.Checks) != 0 || len(rep.Findings) == 0 {
		t.Fatalf("Run: %v %+v", err, rep)
	}
	if n := srv.Count("auth.example.com", "/oauth/token"); n != 0 {
		t.Errorf("%d token requests to an unusable Company", n)
	}
}
