package tools_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// events returns the events of a conversation tool's result.
func events(got map[string]any) []map[string]any {
	var out []map[string]any
	list, _ := got["events"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		out = append(out, m)
	}
	return out
}

// said returns "from: text" of the message events of a result.
func said(got map[string]any) []string {
	var out []string
	for _, e := range events(got) {
		if e["type"] == "message" {
			out = append(out, e["from"].(string)+": "+e["text"].(string))
		}
	}
	return out
}

// eventOf returns the first event of a type, or nil.
func eventOf(got map[string]any, typ string) map[string]any {
	for _, e := range events(got) {
		if e["type"] == typ {
			return e
		}
	}
	return nil
}

// send calls send_message and fails on an error result.
func send(t *testing.T, cs *sdk.ClientSession, args map[string]any) map[string]any {
	t.Helper()
	if _, ok := args["domain"]; !ok {
		args["domain"] = domain
	}
	if _, ok := args["wait_seconds"]; !ok {
		args["wait_seconds"] = 5
	}
	res, got := call(t, cs, "send_message", args)
	if res.IsError {
		t.Fatalf("send_message %v = %v", args, got)
	}
	return got
}

// TestConversation: a conversation from first message to close, with a
// handoff to a person, through the official client at both revisions.
func TestConversation(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, nil)
			cs := h.connect(t, rev)
			first := send(t, cs, map[string]any{"text": "Hello", "context": map[string]any{"locale": "en-US", "user_available": true}})
			id, _ := first["conversation_id"].(string)
			msgs := said(first)
			if id == "" || first["status"] != "idle" || first["responder"] != "agent" || len(msgs) != 1 || !strings.HasPrefix(msgs[0], "company_agent: ") {
				t.Fatalf("first = %v", first)
			}
			if e := events(first)[0]; e["third_party_content"] != true || first["company_text"] == nil {
				t.Errorf("Company text not marked: %v", first)
			}
			res, again := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
			if res.IsError || len(events(again)) != 0 {
				t.Errorf("a second read returned %v", again)
			}
			res, human := call(t, cs, "request_human", map[string]any{"conversation_id": id})
			if res.IsError || human["status"] != "queued" || human["responder"] != "agent" || !strings.Contains(human["next"].(string), "read_events") {
				t.Fatalf("request_human = %v", human)
			}
			person := h.company.Person(id)
			go func() {
				time.Sleep(100 * time.Millisecond)
				person.Join()
				person.Say("Hi, I'm Alex from the team.")
			}()
			got := waitFor(t, cs, id, func(got map[string]any) bool { return len(said(got)) > 0 })
			if got["responder"] != "human" || !slices.Contains(said(got), "company_person: Hi, I'm Alex from the team.") {
				t.Errorf("after the person joined: %v", got)
			}
			res, closed := call(t, cs, "close_conversation", map[string]any{"conversation_id": id})
			if res.IsError || closed["status"] != "closed" {
				t.Fatalf("close = %v", closed)
			}
			_, list := call(t, cs, "list_conversations", map[string]any{})
			_, all := call(t, cs, "list_conversations", map[string]any{"domain": domain, "include_closed": true})
			if n := len(list["conversations"].([]any)); n != 0 || len(all["conversations"].([]any)) != 1 {
				t.Errorf("open %v, all %v", list, all)
			}
			msgsAtCompany := h.company.Messages(id)
			if len(msgsAtCompany) != 1 || msgsAtCompany[0].Sender != "agent" || msgsAtCompany[0].Context["locale"] != "en-US" {
				t.Errorf("the Company recorded %+v", msgsAtCompany)
			}
			scanForSecrets(t, h, first, again, human, got, closed, list, all)
		})
	}
}

// waitFor reads events until cond holds, gathering them, for at most 10 s.
func waitFor(t *testing.T, cs *sdk.ClientSession, id string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var all []any
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, got := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 2})
		if res.IsError {
			t.Fatalf("read_events = %v", got)
		}
		all = append(all, got["events"].([]any)...)
		got["events"] = all
		if cond(got) || time.Now().After(deadline) {
			return got
		}
	}
}

// TestSendMessageRetried: the connection breaks after the Company accepted
// the message; the retry with the same ID makes ONE message (the Company
// counts).
func TestSendMessageRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[1])
	first := send(t, cs, map[string]any{"text": "Hello"})
	id := first["conversation_id"].(string)
	h.company.DropConnectionAfterAccept(1)
	second := send(t, cs, map[string]any{"conversation_id": id, "text": "Is the insulated jacket warmer?"})
	if n := h.company.Count("api."+domain, "/poppy/conversations/"+id+"/messages"); n != 2 {
		t.Errorf("%d POSTs of the second message, want 2 (dropped, then retried)", n)
	}
	msgs := h.company.Messages(id)
	if len(msgs) != 2 || msgs[1].Text != "Is the insulated jacket warmer?" {
		t.Errorf("the Company recorded %+v", msgs)
	}
	if len(said(second)) != 1 {
		t.Errorf("reply %v", second)
	}
}

// TestConversationRestart: a new poppy-mcp on the same store continues
// from the saved cursor between two reads.
func TestConversationRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	first := send(t, h.connect(t, revisions[0]), map[string]any{"text": "Hello"})
	id := first["conversation_id"].(string)
	person := h.company.Person(id)
	if person.Join() != nil || person.Say("A note while you were away.") != nil {
		t.Fatal("the person could not speak")
	}
	_, cs := h.another(t, revisions[1])
	res, got := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
	if res.IsError || !slices.Equal(said(got), []string{"company_person: A note while you were away."}) {
		t.Fatalf("after a restart: %v", got)
	}
	var reads []poppytest.Request
	for _, r := range h.company.Requests() {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/events") {
			reads = append(reads, r)
		}
	}
	if len(reads) == 0 || !strings.Contains(reads[len(reads)-1].RawQuery, "cursor=evt_") {
		t.Errorf("the read after the restart did not resume from a cursor: %v", reads)
	}
}

// TestConversationStream: a stream cut in the middle of a message loses no
// event and doubles none; the pieces of text ride on progress
// notifications, at both revisions.
func TestConversationStream(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, &poppytest.Options{AgentDelay: 300 * time.Millisecond})
			progress := &progressLog{}
			cs := h.connectWith(t, rev, &sdk.ClientOptions{ProgressNotificationHandler: progress.add})
			first := send(t, cs, map[string]any{"text": "Hello", "wait_seconds": 0})
			id := first["conversation_id"].(string)
			h.company.DropStreamAfter(2)
			res := readWithProgress(t, cs, id, 10)
			_, again := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
			if n := len(events(again)); n != 0 {
				t.Errorf("%d events came again", n)
			}
			text := res.Content[0].(*sdk.TextContent).Text
			if strings.Count(text, "company_agent (third-party content)") != 1 {
				t.Errorf("the reply is not there exactly once:\n%s", text)
			}
			notes := progress.all()
			joined := strings.Join(notes, "\n")
			if !strings.Contains(joined, "The Company is writing (third-party content, partial)") || !strings.Contains(joined, "stream broke") {
				t.Errorf("progress notifications: %q", notes)
			}
		})
	}
}

// TestConversationCursorExpired: the Company forgot the events after the
// saved cursor; the model is told part of the history is missing.
func TestConversationCursorExpired(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[0])
	id := send(t, cs, map[string]any{"text": "Hello"})["conversation_id"].(string)
	person := h.company.Person(id)
	if person.Join() != nil || person.Say("one") != nil || person.Say("two") != nil {
		t.Fatal("the person could not speak")
	}
	h.company.ExpireCursors()
	res, got := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
	if res.IsError || got["history_missing"] != true || !strings.Contains(got["next"].(string), "missing") ||
		!slices.Equal(said(got), []string{"company_person: two"}) {
		t.Errorf("after expiry: %v", got)
	}
}

// TestConversationArguments: bad arguments are refused before any request.
func TestConversationArguments(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[1])
	for _, tt := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"send_message", map[string]any{"domain": domain}, "invalid_arguments"},
		{"send_message", map[string]any{"domain": domain, "context": map[string]any{"locale": 5}}, "invalid_arguments"},
		{"send_message", map[string]any{"domain": domain, "text": "x", "conversation_id": "cnv_unknown"}, "conversation_not_found"},
		{"read_events", map[string]any{"conversation_id": "../etc"}, "invalid_conversation_id"},
		{"start_direct_conversation", map[string]any{"conversation_id": "cnv_unknown", "text": ""}, "invalid_arguments"},
		{"close_conversation", map[string]any{"conversation_id": "cnv_unknown"}, "unknown_conversation"},
	} {
		res, got := call(t, cs, tt.tool, tt.args)
		if !res.IsError || got["error"] != tt.code {
			t.Errorf("%s %v = %v, want %s", tt.tool, tt.args, got, tt.code)
		}
	}
	if n := h.company.Count("api."+domain, "/poppy/conversations"); n != 0 {
		t.Errorf("%d conversation requests", n)
	}
}

// TestNoCompanyAgent: a Company without a poppy conversation protocol.
func TestNoCompanyAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		doc["agent"] = map[string]any{"protocols": []any{map[string]any{"type": "example.com/chat", "endpoint": "https://api.example.com/chat"}}}
	}})
	res, got := call(t, h.connect(t, revisions[0]), "send_message", map[string]any{"domain": domain, "text": "Hello"})
	if !res.IsError || got["error"] != "no_company_agent" {
		t.Errorf("got %v", got)
	}
}

// TestConversationPendingAfterRestart: a message a poppy-mcp process could
// not deliver before it stopped is sent again, with its original ID, by
// the poppy-mcp still running on the same store (its background sender,
// conversation_pending.go), once the Company's hold passes, and the next
// conversation call of a new poppy-mcp on that store says so; the Company
// has it exactly once. On the old code it was sent only if the same text
// was sent again.
func TestConversationPendingAfterRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	first := send(t, h.connect(t, revisions[0]), map[string]any{"text": "Hello"})
	id := first["conversation_id"].(string)
	path := "/poppy/conversations/" + id + "/messages"
	h.company.RateLimit("api."+domain, path, 1, time.Second)
	stopping := h.tracker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond) // cannot wait the second out
	defer cancel()
	if _, err := stopping.Send(ctx, id, conversation.Message{Sender: conversation.SenderAgent, Text: "Yes, the medium one"}, nil); err == nil {
		t.Fatal("the limited send succeeded")
	}
	waitUntil(t, "the pending message sent", func() bool { // after the Company's hold: the process is gone
		names, err := h.store.SecretNames(context.Background(), "conversation/pending/")
		return err == nil && len(names) == 0
	})
	_, cs := h.another(t, revisions[1])
	res, got := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
	resent, _ := got["resent"].([]any)
	text := res.Content[0].(*sdk.TextContent).Text
	if res.IsError || len(resent) != 1 || resent[0].(map[string]any)["outcome"] != "delivered" || !strings.Contains(text, "sent again with its original ID") {
		t.Fatalf("after the restart: %v\n%s", got, text)
	}
	for range 2 {
		if msgs := h.company.Messages(id); len(msgs) != 2 || msgs[1].Text != "Yes, the medium one" {
			t.Fatalf("the Company has %+v, want the message exactly once", msgs)
		}
		if _, again := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0}); again["resent"] != nil {
			t.Errorf("sent again twice: %v", again)
		}
	}
}

// tracker is a conversation Tracker of the harness's User at the Company,
// on the harness's store, with a Session of its own and a Client that
// never retries: another poppy-mcp process, about to stop.
func (h *harness) tracker(t *testing.T) *conversation.Tracker {
	t.Helper()
	ctx := context.Background()
	issuer := h.company.Issuer()
	userID, err := h.store.UserID(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.agent.StartSession(ctx, auth.Company{Issuer: issuer, Domain: domain,
		TokenEndpoint: h.company.URL("auth."+domain, "/oauth/token")}, userID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := conversation.New(sess.Client(), h.company.URL("api."+domain, "/poppy/conversations"),
		&conversation.Options{NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := conversation.NewTracker(c, h.store, conversation.Owner{Issuer: issuer, UserID: userID, Domain: domain}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// progressLog collects the messages of the progress notifications a
// client receives. It is safe for concurrent use.
type progressLog struct {
	mu    sync.Mutex
	notes []string
}

func (p *progressLog) add(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, r.Params.Message)
}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.notes)
}

// readWithProgress calls read_events on a conversation, waiting up to
// wait seconds, with a progress token; it fails on an error result.
func readWithProgress(t *testing.T, cs *sdk.ClientSession, id string, wait int) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := &sdk.CallToolParams{Name: "read_events", Arguments: map[string]any{"conversation_id": id, "wait_seconds": wait}}
	params.SetProgressToken("read-" + id)
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("read_events: %v %v", err, res)
	}
	return res
}
