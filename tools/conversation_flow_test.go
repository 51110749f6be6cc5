package tools_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestConversationSignIn: the Company Agent needs the account; the result
// names the sign-in tool; after the user signs in, the same conversation
// continues signed in and gets its answer (Poppy 0.1 §7.11).
func TestConversationSignIn(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newSignInHarness(t, signInOpts(nil))
			cs := h.connect(t, rev)
			got := send(t, cs, map[string]any{"text": "What is the status of order 1042?"})
			id := got["conversation_id"].(string)
			ev := eventOf(got, "authorization")
			if ev == nil || ev["tool"] != "sign_in_device" || !slices.Equal(strs(ev["scopes"]), []string{"poppy:read"}) ||
				!strings.Contains(got["next"].(string), "sign_in_device") || !strings.Contains(got["next"].(string), id) {
				t.Fatalf("no sign-in advice: %v", got)
			}
			signIn(t, h, cs, "poppy:read")
			cont := send(t, cs, map[string]any{"conversation_id": id, "text": "The user has signed in."})
			if eventOf(cont, "authorization") != nil || !slices.ContainsFunc(said(cont), func(s string) bool {
				return strings.HasPrefix(s, "company_agent: ") && strings.Contains(s, "1042")
			}) {
				t.Errorf("after signing in: %v", said(cont))
			}
			if cv, _ := h.company.Conversation(id); cv.Account != "acct_dana" {
				t.Errorf("the conversation belongs to %q, want acct_dana", cv.Account)
			}
			scanForSecrets(t, h, got, cont)
		})
	}
}

// TestConversationHeldAccountToken: another poppy-mcp process signed in
// meanwhile, unheard (SQLite's notifications stay in their process); this
// one answers the authorization event with the Account Token it now holds
// and continues the conversation by itself.
func TestConversationHeldAccountToken(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	id := send(t, cs, map[string]any{"text": "Hello"})["conversation_id"].(string)
	_, other := h.anotherProcess(t, revisions[1])
	signIn(t, h, other, "poppy:read")
	got := send(t, cs, map[string]any{"conversation_id": id, "text": "What is the status of order 1042?"})
	ev := eventOf(got, "authorization")
	if ev == nil || ev["tool"] != nil || !strings.Contains(ev["next"].(string), "nothing to do") {
		t.Fatalf("authorization not answered: %v", got)
	}
	if !slices.ContainsFunc(said(got), func(s string) bool { return strings.Contains(s, "1042") && strings.HasPrefix(s, "company_agent") }) {
		t.Errorf("no answer after signing in: %v", said(got))
	}
	msgs := h.company.Messages(id)
	if last := msgs[len(msgs)-1]; last.Sender != "agent" || !strings.Contains(last.Text, "signed in") {
		t.Errorf("the continuation sent: %+v", last)
	}
	scanForSecrets(t, h, got)
}

// TestConversationDirect: the Company asks for the user; the user talks in
// a Direct Conversation; the parent refuses messages meanwhile and names it
// (Poppy 0.1 §7.10).
func TestConversationDirect(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, nil)
			cs := h.connect(t, rev)
			got := send(t, cs, map[string]any{"text": "Please have a specialist confirm the exchange."})
			parent := got["conversation_id"].(string)
			ur := eventOf(got, "user_requested")
			if ur == nil || ur["reason"] == "" || ur["third_party_content"] != true || !strings.Contains(got["next"].(string), "start_direct_conversation") {
				t.Fatalf("no request for the user: %v", got)
			}
			res, direct := call(t, cs, "start_direct_conversation", map[string]any{"conversation_id": parent,
				"text": "Hi, I have a question about the exchange.", "wait_seconds": 5})
			did, _ := direct["conversation_id"].(string)
			if res.IsError || did == "" || did == parent || direct["parent_conversation_id"] != parent {
				t.Fatalf("start_direct_conversation = %v", direct)
			}
			res, blocked := call(t, cs, "send_message", map[string]any{"domain": domain, "conversation_id": parent, "text": "More?"})
			if !res.IsError || blocked["error"] != "direct_conversation_open" || blocked["direct_conversation_id"] != did {
				t.Errorf("message to the parent: %v", blocked)
			}
			send(t, cs, map[string]any{"conversation_id": did, "text": "Medium, please.", "from_user": true})
			if msgs := h.company.Messages(did); len(msgs) != 2 || msgs[0].Sender != "human" || msgs[1].Sender != "human" {
				t.Errorf("the Direct Conversation's messages: %+v", msgs)
			}
			_, pr := call(t, cs, "read_events", map[string]any{"conversation_id": parent, "wait_seconds": 0})
			if e := eventOf(pr, "direct_opened"); e == nil || e["conversation_id"] != did {
				t.Errorf("parent: %v", pr)
			}
			if res, c := call(t, cs, "close_conversation", map[string]any{"conversation_id": did}); res.IsError || c["status"] != "closed" {
				t.Fatalf("close: %v", c)
			}
			_, pr = call(t, cs, "read_events", map[string]any{"conversation_id": parent, "wait_seconds": 0})
			if e := eventOf(pr, "direct_closed"); e == nil || e["conversation_id"] != did {
				t.Errorf("parent after the close: %v", pr)
			}
			_, list := call(t, cs, "list_conversations", map[string]any{})
			if l := list["conversations"].([]any); len(l) != 1 || l[0].(map[string]any)["conversation_id"] != parent {
				t.Errorf("open conversations: %v", list)
			}
		})
	}
}

// TestConversationHandoffNoOne: no person is available; the status goes
// back to idle with the agent, and the Company Agent says why (§7.9).
func TestConversationHandoffNoOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &poppytest.Options{NoHumans: true})
	cs := h.connect(t, revisions[1])
	id := send(t, cs, map[string]any{"text": "Hello"})["conversation_id"].(string)
	if res, got := call(t, cs, "request_human", map[string]any{"conversation_id": id}); res.IsError || got["status"] != "queued" {
		t.Fatalf("request_human = %v", got)
	}
	got := waitFor(t, cs, id, func(got map[string]any) bool { return got["status"] == "idle" && len(said(got)) > 0 })
	if got["responder"] != "agent" || len(said(got)) != 1 || !strings.HasPrefix(said(got)[0], "company_agent: ") {
		t.Errorf("got %v", got)
	}
}
