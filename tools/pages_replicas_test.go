package tools_test

import (
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/pages"
)

// The tests of this file run two tools Servers, each with pages of its
// own, over one store, as two replicas share one database: a page opened
// through one is used on the other's listener. cmd/poppy-mcp's
// TestHostedPagesThroughReplicas does the same with real processes on
// PostgreSQL behind a load balancer.

// replicaWithPages is a replica of h (its agent and store) whose pages are
// kept in h's store, and a client connected to it at rev.
func (h *harness) replicaWithPages(t *testing.T, rev string) (*pages.Server, *sdk.ClientSession) {
	t.Helper()
	pg, err := pages.New(&pages.Options{Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	_, cs := h.anotherServing(t, rev, h.store, pg)
	return pg, cs
}

// on is the page u, opened on a's listener, at b's.
func on(u string, a, b *pages.Server) string {
	return b.LoopbackURL() + strings.TrimPrefix(u, a.LoopbackURL())
}

// TestMediatedPageOnAnotherReplica: a mediated sign-in started through
// replica A is finished on B's page, credentials and one-time code, with
// B's Session; A's sign_in_status, waiting, reads it complete and A's own
// Session is signed in. The link then answers 410 on both.
func TestMediatedPageOnAnotherReplica(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, nil)
	pa, a := h.replicaWithPages(t, revisions[1])
	pb, _ := h.replicaWithPages(t, revisions[1])
	_, got := startMediated(t, a)
	u, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(u, pa.LoopbackURL()+"/p/") {
		t.Fatalf("sign_in_mediated through A = %v", got)
	}
	b := newUserBrowser(t, h.local)
	page := b.fillCredentials(on(u, pa, pb), "sam@example.com", "sam-secret-42")
	if done := codeStep(t, b, h.company, on(u, pa, pb), page); !strings.Contains(done, "You are signed in") {
		t.Fatalf("the code on B: %s", done)
	}
	if _, st := status(t, a, 20); st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status through A = %v", st)
	}
	for _, link := range []string{u, on(u, pa, pb)} {
		if again := b.get(link); !strings.Contains(again, "expired or was already used") && !strings.Contains(again, "has finished") {
			t.Errorf("the link again at %s: %s", link, again)
		}
	}
}

// TestMediatedCodeOnAnotherReplica: the one-time code of a sign-in whose
// credentials went through B's Session is posted to A: A's Session cannot
// finish it (Poppy 0.1 §4.7: only the Session that started it can), so A's
// page asks for the credentials again, and A finishes it with its own
// Session and a new code. poppytest reports a code from the wrong Session
// as the agent's bug, which would fail the test.
func TestMediatedCodeOnAnotherReplica(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, nil)
	pa, a := h.replicaWithPages(t, revisions[0])
	pb, _ := h.replicaWithPages(t, revisions[0])
	_, got := startMediated(t, a)
	u, _ := got["sign_in_url"].(string)
	b := newUserBrowser(t, h.local)
	if page := b.fillCredentials(on(u, pa, pb), "sam@example.com", "sam-secret-42"); !strings.Contains(page, `name="code"`) {
		t.Fatalf("the credentials on B: %s", page)
	}
	if page := b.post(on(u, pa, pb), url.Values{"code": {"nope"}}); !strings.Contains(page, "not accepted") { // B's own Session: it takes it
		t.Fatalf("a wrong code on B: %s", page)
	}
	code := h.company.LastCode(signInID(t, h.company))
	if page := b.post(u, url.Values{"code": {code}}); !strings.Contains(page, "enter your details again") || !strings.Contains(page, `name="email"`) {
		t.Fatalf("B's code posted on A: %s", page)
	}
	page := b.fillCredentials(u, "sam@example.com", "sam-secret-42")
	if done := codeStep(t, b, h.company, u, page); !strings.Contains(done, "You are signed in") {
		t.Fatalf("the code on A: %s", done)
	}
	if _, st := status(t, a, 5); st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status through A = %v", st)
	}
}
