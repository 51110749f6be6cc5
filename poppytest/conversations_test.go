package poppytest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func TestConversationStartAndReply(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	first := map[string]any{"id": "msg_Yq3v8LrT0aWc5NkE", "sender": "agent",
		"text":    "The user would like to know what you sell.",
		"context": map[string]any{"locale": "en-US", "time_zone": "America/Los_Angeles", "user_available": true}}
	r := a.start(first)
	wantStatus(t, r, 201, poppytest.StatusWorking, poppytest.ResponderAgent)
	id := r.str("conversation_id")
	evs, last := a.settle(id, "")
	wantStatus(t, last, 200, poppytest.StatusIdle, poppytest.ResponderAgent)

	var types []string
	for _, e := range evs {
		types = append(types, e["type"].(string))
		if _, err := time.Parse(time.RFC3339, e["created_at"].(string)); err != nil || !strings.HasPrefix(e["id"].(string), "evt_") {
			t.Errorf("event %v: id or created_at (%v)", e, err)
		}
	}
	if want := []string{"message", "state", "message", "state"}; !cmp.Equal(types, want) {
		t.Fatalf("event types %v, want %v", types, want)
	}
	echo := evs[0]["message"].(map[string]any)
	if echo["id"] != "msg_Yq3v8LrT0aWc5NkE" || echo["role"] != "personal_agent" || echo["sender"] != "agent" || echo["context"] == nil {
		t.Errorf("the agent's message as an event: %v", echo)
	}
	if evs[1]["status"] != "working" || evs[1]["responder"] != "agent" || evs[3]["status"] != "idle" {
		t.Errorf("state events %v, %v", evs[1], evs[3])
	}
	reply := evs[2]["message"].(map[string]any)
	if reply["role"] != "company" || reply["sender"] != "agent" || reply["text"] == "" || !strings.HasPrefix(reply["id"].(string), "msg_") {
		t.Errorf("reply %v", reply)
	}
	if last.str("cursor") != evs[3]["id"] {
		t.Errorf("cursor %q, want the last event %q", last.str("cursor"), evs[3]["id"])
	}
	if msgs := s.Messages(id); len(msgs) != 1 || msgs[0].ID != "msg_Yq3v8LrT0aWc5NkE" || msgs[0].Role != "personal_agent" {
		t.Errorf("Messages = %+v", msgs)
	}
	cv, ok := s.Conversation(id)
	if !ok || cv.ClientID != testClientID || cv.UserID != "usr_Q7c1vK" || cv.Account != "" || cv.Context["locale"] != "en-US" {
		t.Errorf("Conversation = %+v", cv)
	}
	wantNoViolation(t, s, rt)
}

func TestRepliesInTheResponse(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	r := a.request("POST", "", "wait=10", map[string]any{"message": msg("hello")}, nil)
	wantStatus(t, r, 201, poppytest.StatusIdle, poppytest.ResponderAgent)
	id := r.str("conversation_id")
	if texts := companyTexts(events(r)); len(texts) != 1 || r.body["has_more"] != false {
		t.Fatalf("POST with wait: %v", r.body)
	}
	cursor := r.str("cursor")
	r = a.send(id, msg("and what else?"), "wait=10&cursor="+cursor)
	wantStatus(t, r, 202, poppytest.StatusIdle, poppytest.ResponderAgent)
	evs := events(r)
	if len(evs) != 4 || evs[0]["message"].(map[string]any)["text"] != "and what else?" || len(companyTexts(evs)) != 1 {
		t.Errorf("POST with cursor and wait: events %v", evs)
	}
	// A cursor alone asks for a read without waiting.
	r = a.send(id, msg("thanks"), "cursor="+r.str("cursor"))
	if r.status != 202 || len(events(r)) == 0 || r.str("cursor") == "" {
		t.Errorf("POST with cursor: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
}

func TestMessageIDs(t *testing.T) {
	s, rt, a := newConvCompany(t, &poppytest.Options{AgentDelay: -1})
	first := msg("hello")
	id := a.start(first).str("conversation_id")
	a.settle(id, "")
	n := len(s.Events(id))

	// Poppy 0.1 §7.3: a retried first message returns the conversation already started.
	r := a.start(first)
	if r.status != 201 || r.str("conversation_id") != id || len(s.Conversations()) != 1 {
		t.Errorf("retried first message: %d %v, %d conversations", r.status, r.body, len(s.Conversations()))
	}
	second := msg("more")
	a.send(id, second, "")
	a.settle(id, "")
	n2 := len(s.Events(id))
	if r := a.send(id, second, ""); r.status != 202 || r.str("conversation_id") != id || r.str("status") == "" {
		t.Errorf("retried message: %d %v", r.status, r.body)
	}
	if got := len(s.Messages(id)); got != 2 || len(s.Events(id)) != n2 || n2 <= n {
		t.Errorf("after retries: %d messages, %d events (want 2, %d)", got, len(s.Events(id)), n2)
	}
	wantNoViolation(t, s, rt)

	changed := map[string]any{"id": second["id"], "sender": "agent", "text": "other words"}
	wantConvError(t, a.send(id, changed, ""), 409, "message_id_conflict")
	wantViolation(t, s, rt, "§7.3", "other content")
	if len(s.Messages(id)) != 2 {
		t.Errorf("a conflicting message was added")
	}
}

func TestMessageIDConflictAcrossConversations(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	m := msg("hello")
	a.mustStart("first")
	other := a.mustStart("second")
	if r := a.send(other, m, ""); r.status != 202 {
		t.Fatalf("send: %d", r.status)
	}
	// Poppy 0.1 §7.3: IDs are unique for the User, not for one conversation.
	wantConvError(t, a.start(m), 409, "message_id_conflict")
	wantViolation(t, s, rt, "§7.3")
}

func TestMessageValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    any
		ctype   string
		section string
	}{
		{"nothing to say", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "agent"}}, "", "§7.4"},
		{"empty text", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "agent", "text": ""}}, "", "§7.4"},
		{"sender bot", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "bot", "text": "hi"}}, "", "§7.8"},
		{"no sender", map[string]any{"message": map[string]any{"id": "msg_1", "text": "hi"}}, "", "§7.8"},
		{"no id", map[string]any{"message": map[string]any{"sender": "agent", "text": "hi"}}, "", "§7.2"},
		{"id with a slash", map[string]any{"message": map[string]any{"id": "msg/1", "sender": "agent", "text": "hi"}}, "", "§7.2"},
		{"id too long", map[string]any{"message": map[string]any{"id": strings.Repeat("a", 257), "sender": "agent", "text": "hi"}}, "", "§7.2"},
		{"user_available a string", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "agent",
			"context": map[string]any{"user_available": "yes"}}}, "", "§7.4"},
		{"locale a number", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "agent",
			"context": map[string]any{"locale": 5}}}, "", "§7.4"},
		{"time_zone an offset", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "agent",
			"context": map[string]any{"time_zone": "+02:00 "}}}, "", "§7.4"},
		{"context a list", map[string]any{"message": map[string]any{"id": "msg_1", "sender": "agent", "context": []any{}}}, "", "§7.4"},
		{"no message", map[string]any{}, "", "§7.3"},
		{"form encoded", map[string]any{"message": msg("hi")}, "application/x-www-form-urlencoded", "§7.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a := newConvCompany(t, nil)
			h := http.Header{}
			if tc.ctype != "" {
				h.Set("Content-Type", tc.ctype)
			}
			wantConvError(t, a.request("POST", "", "", tc.body, h), 400, "invalid_request")
			wantViolation(t, s, rt, tc.section)
			if n := len(s.Conversations()); n != 0 {
				t.Errorf("%d conversations started", n)
			}
		})
	}
}

func TestContextOnlyMessage(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	r := a.start(map[string]any{"id": "msg_a", "sender": "agent", "text": "hi",
		"context": map[string]any{"locale": "en-US", "user_available": true, "units": "metric"}})
	id := r.str("conversation_id")
	_, last := a.settle(id, "")
	r = a.send(id, map[string]any{"id": "msg_b", "sender": "agent", "context": map[string]any{"user_available": false}}, "")
	// A message with only context says nothing: no reply comes.
	wantStatus(t, r, 202, poppytest.StatusIdle, poppytest.ResponderAgent)
	after := events(a.read(id, "cursor="+last.str("cursor")))
	if len(after) != 1 || after[0]["type"] != "message" {
		t.Errorf("after a context-only message: %v", after)
	}
	cv, _ := s.Conversation(id)
	want := map[string]any{"locale": "en-US", "user_available": false, "units": "metric"}
	if diff := cmp.Diff(want, cv.Context); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff) // Poppy 0.1 §7.4: fields left out keep their values
	}
	wantNoViolation(t, s, rt)
}

func TestReadsPageAndExpire(t *testing.T) {
	s, rt, a, id, cursor := newSettled(t, &poppytest.Options{EventPageSize: 2})
	a.send(id, msg("again"), "")
	a.settle(id, cursor)
	all := s.Events(id)
	if len(all) < 6 {
		t.Fatalf("%d events, want at least 6", len(all))
	}

	var got []string
	cursor, reads := "", 0
	for {
		q := ""
		if cursor != "" {
			q = "cursor=" + cursor
		}
		r := a.read(id, q)
		reads++
		evs := events(r)
		if len(evs) > 2 || r.str("status") == "" || r.str("responder") == "" {
			t.Fatalf("read %v", r.body)
		}
		for _, e := range evs {
			got = append(got, e["id"].(string))
		}
		cursor = r.str("cursor")
		if r.body["has_more"] == false {
			break
		}
	}
	var want []string
	for _, e := range all {
		want = append(want, e.ID)
	}
	if !cmp.Equal(got, want) || reads != (len(all)+1)/2 {
		t.Errorf("paged %v in %d reads, want %v", got, reads, want)
	}
	// Poppy 0.1 §7.5: "cursor is the last event returned, or the request's cursor if there were none"
	if r := a.read(id, "cursor="+cursor); len(events(r)) != 0 || r.str("cursor") != cursor || r.body["has_more"] != false {
		t.Errorf("read at the end: %v", r.body)
	}
	wantConvError(t, a.read(id, "cursor=evt_unknown"), 410, "cursor_expired")
	wantConvError(t, a.read(id, "wait=soon"), 400, "invalid_request")
	wantConvError(t, a.read(id, "cursor=a&cursor=b"), 400, "invalid_request")

	s.ExpireCursors()
	wantConvError(t, a.read(id, "cursor="+want[0]), 410, "cursor_expired")
	if r := a.read(id, ""); len(events(r)) != 1 || r.str("cursor") != want[len(want)-1] {
		t.Errorf("read from the start after ExpireCursors: %v", r.body)
	}
	if s.Served("cursor_expired") != 2 {
		t.Errorf("Served(cursor_expired) = %d", s.Served("cursor_expired"))
	}
	wantNoViolation(t, s, rt)
}

func TestLongPoll(t *testing.T) {
	s, rt, a, id, cursor := newSettled(t, nil)

	done := make(chan response, 1)
	path := "/poppy/conversations/" + id + "/events"
	before := s.Count("api.example.com", path)
	go func() { done <- a.read(id, "wait=30&cursor="+cursor) }()
	for s.Count("api.example.com", path) == before {
		time.Sleep(time.Millisecond) // until the read has arrived
	}
	time.Sleep(20 * time.Millisecond)
	// The read waits for an event; the person at the Company supplies one.
	if err := s.Person(id).Join(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if evs := events(r); r.status != 200 || len(evs) == 0 || evs[0]["type"] != "state" || evs[0]["responder"] != "human" {
		t.Errorf("long poll: %d %v", r.status, r.body)
	}
	// A read that times out returns no events, with cursor, status and responder.
	r = a.read(id, "wait=0.2&cursor="+r.str("cursor"))
	if r.status != 200 || len(events(r)) != 0 || r.str("cursor") == "" || r.str("status") != "idle" || r.str("responder") != "human" {
		t.Errorf("timed-out read: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
}

func TestOwners(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	wantConvError(t, a.read("cnv_nope", ""), 404, "conversation_not_found")
	wantNoViolation(t, s, rt)

	// Poppy 0.1 §7.2: "Any Session that matches can continue it"
	a.newSession()
	if r := a.read(id, ""); r.status != 200 {
		t.Errorf("a new Session of the same User: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)

	// "The Company MUST reject requests from any other client_id, User, or account."
	b := a.otherUser("usr_other")
	wantConvError(t, b.read(id, ""), 404, "conversation_not_found")
	wantViolation(t, s, rt, "§7.2", "another User")
}

func TestHandoffAndPerson(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	wantStatus(t, a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil), 202, poppytest.StatusQueued, poppytest.ResponderAgent)
	// Handing off twice changes nothing.
	wantStatus(t, a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil), 202, poppytest.StatusQueued, poppytest.ResponderAgent)
	// Poppy 0.1 §7.9: the agent "can keep sending messages while it waits"; the Company Agent stays quiet.
	wantStatus(t, a.send(id, msg("The order is 1042."), ""), 202, poppytest.StatusQueued, poppytest.ResponderAgent)

	p := s.Person(id)
	if err := p.Say("too early"); err == nil {
		t.Errorf("Say before Join succeeded")
	}
	if err := p.Join(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, a.send(id, map[string]any{"id": "msg_" + jti(), "sender": "human", "text": "Hi, it's Dana."}, ""),
		202, poppytest.StatusIdle, poppytest.ResponderHuman)
	if err := p.Say("Hello Dana, I'm Alex."); err != nil {
		t.Fatal(err)
	}
	if err := p.Leave("I'll hand you back to our assistant."); err != nil {
		t.Fatal(err)
	}
	evs, last := a.settle(id, "")
	wantStatus(t, last, 200, poppytest.StatusIdle, poppytest.ResponderAgent)
	var states []string
	for _, e := range ofType(evs, "state") {
		states = append(states, e["status"].(string)+"/"+e["responder"].(string))
	}
	if want := []string{"working/agent", "idle/agent", "queued/agent", "idle/human", "idle/agent"}; !cmp.Equal(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
	var senders []string
	for _, e := range ofType(evs, "message") {
		m := e["message"].(map[string]any)
		senders = append(senders, m["role"].(string)+"/"+m["sender"].(string))
	}
	want := []string{"personal_agent/agent", "company/agent", "personal_agent/agent", "personal_agent/human", "company/human", "company/human"}
	if !cmp.Equal(senders, want) {
		t.Errorf("messages %v, want %v", senders, want)
	}
	// Back with the Company Agent, which answers again.
	a.send(id, msg("thanks"), "")
	if evs, _ := a.settle(id, last.str("cursor")); len(companyTexts(evs)) != 1 {
		t.Errorf("no answer after the person left: %v", evs)
	}
	wantNoViolation(t, s, rt)
}

func TestNoHumans(t *testing.T) {
	s, rt, a, id, cursor := newSettled(t, &poppytest.Options{NoHumans: true})
	wantStatus(t, a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil), 202, poppytest.StatusQueued, poppytest.ResponderAgent)
	evs, end := a.settle(id, cursor)
	wantStatus(t, end, 200, poppytest.StatusIdle, poppytest.ResponderAgent)
	if texts := companyTexts(evs); len(texts) != 1 || !strings.Contains(texts[0], "No one") {
		t.Errorf("no reason given: %v", evs)
	}
	wantNoViolation(t, s, rt)
}

func TestControlBodies(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	wantConvError(t, a.request("POST", "/"+id+"/handoff", "", []any{}, nil), 400, "invalid_request")
	wantViolation(t, s, rt, "§7.9", "not a JSON object")
	if cv, _ := s.Conversation(id); cv.Status == poppytest.StatusQueued {
		t.Errorf("a bad handoff request was acted on")
	}
}

func TestClosing(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil)
	// Poppy 0.1 §7.12: closing "cancels any pending handoff" and answers 200 with status and responder.
	wantStatus(t, a.request("POST", "/"+id+"/close", "", map[string]any{}, nil), 200, poppytest.StatusClosed, poppytest.ResponderAgent)
	wantStatus(t, a.request("POST", "/"+id+"/close", "", map[string]any{}, nil), 200, poppytest.StatusClosed, poppytest.ResponderAgent)
	if err := s.Person(id).Join(); err == nil {
		t.Errorf("a person joined a closed conversation")
	}
	wantConvError(t, a.send(id, msg("one more thing"), ""), 409, "conversation_closed")
	wantConvError(t, a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil), 409, "conversation_closed")
	// "its events stay readable", and a read does not wait on a closed conversation.
	r := a.read(id, "wait=30")
	evs := events(r)
	if r.status != 200 || r.str("status") != "closed" || evs[len(evs)-1]["status"] != "closed" {
		t.Errorf("read of a closed conversation: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)

	other := a.mustStart("hello again")
	if err := s.CloseConversation(other); err != nil {
		t.Fatal(err)
	}
	wantConvError(t, a.send(other, msg("hi"), ""), 409, "conversation_closed")
	if err := s.CloseConversation("cnv_nope"); err == nil {
		t.Errorf("CloseConversation of no conversation succeeded")
	}
}

func TestFailNextPost(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	s.FailNextPost(1)
	first := msg("hello")
	r := a.start(first)
	if r.status != 503 {
		t.Fatalf("FailNextPost: %d %v", r.status, r.body)
	}
	// The message was accepted before the 503: the retry gets the original answer.
	r = a.start(first)
	if r.status != 201 || len(s.Conversations()) != 1 || r.str("conversation_id") != s.Conversations()[0].ID {
		t.Fatalf("retry after 503: %d %v, %d conversations", r.status, r.body, len(s.Conversations()))
	}
	id := r.str("conversation_id")
	s.FailNextPost(1)
	m := msg("more")
	if r := a.send(id, m, ""); r.status != 503 {
		t.Fatalf("FailNextPost on a message: %d", r.status)
	}
	if r := a.send(id, m, ""); r.status != 202 || len(s.Messages(id)) != 2 {
		t.Errorf("retry: %d, %d messages", r.status, len(s.Messages(id)))
	}
	if s.Served("server_error") != 2 || s.Count("api.example.com", "/poppy/conversations/"+id+"/messages") != 2 {
		t.Errorf("Served(server_error) = %d", s.Served("server_error"))
	}
	wantNoViolation(t, s, rt)
}

func TestDropConnectionAfterAccept(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	s.DropConnectionAfterAccept(1)
	m := msg("more")
	b, _ := jsonBody(map[string]any{"message": m})
	req, _ := http.NewRequest("POST", testConvURL+"/"+id+"/messages", b)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "DPoP "+a.token)
	req.Header.Set("DPoP", a.proof("POST", testConvURL+"/"+id+"/messages", a.token, "", nil))
	resp, err := s.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("DropConnectionAfterAccept: got %d, want a broken connection", resp.StatusCode)
	}
	if len(s.Messages(id)) != 2 {
		t.Fatalf("the message was not accepted before the drop")
	}
	if r := a.send(id, m, ""); r.status != 202 || len(s.Messages(id)) != 2 {
		t.Errorf("retry: %d, %d messages", r.status, len(s.Messages(id)))
	}
	wantNoViolation(t, s, rt)
}

// TestHoldNextPost: the held POST's message is accepted before its answer
// is held; the answer goes once released, and a retry of the same message
// is not held.
func TestHoldNextPost(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	held, release := s.HoldNextPost()
	m := msg("more")
	answered := make(chan int, 1)
	go func() { answered <- a.send(id, m, "").status }()
	<-held
	if len(s.Messages(id)) != 2 {
		t.Fatal("the held message was not accepted")
	}
	select {
	case st := <-answered:
		t.Fatalf("answered %d while held", st)
	default:
	}
	if r := a.send(id, m, ""); r.status != 202 || len(s.Messages(id)) != 2 {
		t.Errorf("retry while held: %d, %d messages", r.status, len(s.Messages(id)))
	}
	release()
	if st := <-answered; st != 202 {
		t.Errorf("after release: %d", st)
	}
	wantNoViolation(t, s, rt)
}

func TestConversationRateLimit(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	s.RateLimit("api.example.com", "/poppy/conversations", 1, 2*time.Second)
	r := a.start(msg("hello"))
	if r.status != 429 || r.header.Get("Retry-After") != "2" || len(s.Conversations()) != 0 {
		t.Fatalf("rate limited start: %d %v", r.status, r.header)
	}
	a.clock.Advance(2 * time.Second)
	if r := a.start(msg("hello")); r.status != 201 {
		t.Errorf("after Retry-After: %d", r.status)
	}
	wantNoViolation(t, s, rt)
}

func TestConversationTokenInURL(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	a.read(id, "access_token="+a.token)
	wantViolation(t, s, rt, "§4.3", "URL")
}

func TestConversationNeedsDPoP(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	r := a.call("POST", testConvURL, "Bearer", a.token, "")
	if r.status != 401 || len(s.Conversations()) != 0 {
		t.Errorf("Bearer token: %d", r.status)
	}
	wantViolation(t, s, rt, "§4.3")
}

// TestConversationRequireExtension: RequireExtension answers 403
// extension_required with the extension's name until it is lifted.
func TestConversationRequireExtension(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	s.RequireExtension("api.example.com", "/poppy/conversations", "example.com/gift-wrap")
	r := a.start(msg("hello"))
	if r.status != 403 || r.body["error"] != "extension_required" || r.body["extension"] != "example.com/gift-wrap" ||
		len(s.Conversations()) != 0 || s.Served("extension_required") != 1 {
		t.Fatalf("required extension: %d %v", r.status, r.body)
	}
	s.RequireExtension("api.example.com", "/poppy/conversations", "")
	if r := a.start(msg("hello")); r.status != 201 {
		t.Errorf("lifted: %d", r.status)
	}
	wantNoViolation(t, s, rt)
}
