package tools_test

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// notConfirmed sends text to conversation id while the Company is down
// and checks that send_message says it is not confirmed.
func notConfirmed(t *testing.T, cs *sdk.ClientSession, id, text string) {
	t.Helper()
	res, got := call(t, cs, "send_message", map[string]any{"domain": domain, "conversation_id": id, "text": text, "wait_seconds": 0})
	if !res.IsError || got["error"] != "not_confirmed" {
		t.Fatalf("send_message to a Company that is down: %v", got)
	}
}

// reportedOnce checks that the next read_events reports the pending
// message delivered, and the one after reports nothing.
func reportedOnce(t *testing.T, cs *sdk.ClientSession, id, text string) {
	t.Helper()
	res, got := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
	resent, _ := got["resent"].([]any)
	out := res.Content[0].(*sdk.TextContent).Text
	if res.IsError || len(resent) != 1 || resent[0].(map[string]any)["outcome"] != "delivered" ||
		resent[0].(map[string]any)["text"] != text || !strings.Contains(out, "is delivered now") {
		t.Fatalf("the person's next call: %v\n%s", got, out)
	}
	if _, again := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0}); again["resent"] != nil {
		t.Errorf("reported twice: %v", again)
	}
}

// TestConversationPendingSentInBackground: a message send_message could
// not confirm (the Company was down through every retry of the call) is
// sent again by poppy-mcp itself, with backoff, until the Company takes
// it, with no further call from the person; the Company has it exactly
// once, after one POST per injected failure and one more, and the
// person's next call says it is delivered. On the old code nothing sent
// it until the person called again.
func TestConversationPendingSentInBackground(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, n *memnet.Network) {
		h := newHarnessWith(t, nil, &harnessOptions{Net: n})
		t.Cleanup(h.tools.Close)
		cs := h.connect(t, revisions[0])
		id := send(t, cs, map[string]any{"text": "Hello"})["conversation_id"].(string)
		const failures = 15 // the call's own attempts, then more than one round of the background sender's
		h.company.UnavailableNextPosts(failures)
		notConfirmed(t, cs, id, "Yes, the medium one")
		path := "/poppy/conversations/" + id + "/messages"
		for end := time.Now().Add(10 * time.Minute); len(h.company.Messages(id)) < 2 && time.Now().Before(end); {
			time.Sleep(time.Second)
		}
		time.Sleep(5 * time.Minute) // a second send would have happened by now
		if msgs := h.company.Messages(id); len(msgs) != 2 || msgs[1].Text != "Yes, the medium one" {
			t.Fatalf("the Company has %+v, want the message exactly once", msgs)
		}
		if got := h.company.Count("api."+domain, path); got != failures+1 {
			t.Errorf("%d POSTs of the message, want %d: one per failure, then the one that got through", got, failures+1)
		}
		reportedOnce(t, cs, id, "Yes, the medium one")
	})
}

// TestConversationPendingSentForAnotherReplicasPerson: a person of a
// hosted poppy-mcp whose message was not confirmed through one replica
// (which sends nothing in the background here) and who has been forgotten
// there since, is served by the background sender of another replica that
// never saw them: it opens their Session from the store and sends the
// message with its ID, and their next call, through the first replica,
// says it is delivered. The Company has it once.
func TestConversationPendingSentForAnotherReplicasPerson(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil) // h.tools is the other replica, with its background sender
	clock := &testClock{}
	ts := tools.New(discovery.New(&http.Client{Transport: cache.New(h.base, nil)}, &discovery.Options{Holds: h.holds}), &tools.Options{
		Agent: h.agent, Store: h.store, Pages: h.pages, Now: clock.now, EvictIdle: testEvictIdle, PendingSweep: -1,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(ts.Close)
	e := &evictHarness{harness: h, clock: clock, ts: ts, mcp: ts.HTTPHandler()}
	dana := mcpauth.User{Issuer: "https://login.example.org", Subject: "dana"}
	cs, hs := e.as(t, dana)
	id := send(t, cs, map[string]any{"text": "Hello"})["conversation_id"].(string)
	const failures = 8 // the call's 6 attempts, then 2 of the other replica's
	h.company.UnavailableNextPosts(failures)
	notConfirmed(t, cs, id, "Two sizes up")
	cs.Close()
	hs.Close()
	clock.advance(testEvictIdle + time.Second)
	if n := tools.SweepIdle(ts, clock.now()); n != 1 {
		t.Fatalf("forgot %d people, want dana", n)
	}
	waitUntil(t, "the message sent by the other replica", func() bool { return len(h.company.Messages(id)) == 2 })
	path := "/poppy/conversations/" + id + "/messages"
	if got := h.company.Count("api."+domain, path); got != failures+1 {
		t.Errorf("%d POSTs of the message, want %d", got, failures+1)
	}
	cs, _ = e.as(t, dana)
	reportedOnce(t, cs, id, "Two sizes up")
	if msgs := h.company.Messages(id); len(msgs) != 2 || !slices.ContainsFunc(msgs, func(m poppytest.Message) bool { return m.Text == "Two sizes up" }) {
		t.Errorf("the Company has %+v, want the message once", msgs)
	}
}
