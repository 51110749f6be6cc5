package poppytest_test

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// startDirect starts a Direct Conversation linked to parent with the User's words.
func (a *convAgent) startDirect(parent string, m map[string]any) response {
	a.t.Helper()
	return a.request("POST", "", "", map[string]any{"parent_conversation_id": parent, "message": m}, nil)
}

func human(text string) map[string]any {
	m := msg(text)
	m["sender"] = "human"
	return m
}

func TestDirectConversation(t *testing.T) {
	s, rt, a, parent, cursor := newSettled(t, nil)

	first := human("Hi, I have a question about the exchange.")
	r := a.startDirect(parent, first)
	wantStatus(t, r, 201, poppytest.StatusWorking, poppytest.ResponderAgent)
	direct := r.str("conversation_id")
	if direct == parent || direct == "" {
		t.Fatalf("Direct Conversation ID %q", direct)
	}
	// A retried first message returns the Direct Conversation, not direct_conversation_open.
	if r := a.startDirect(parent, first); r.status != 201 || r.str("conversation_id") != direct {
		t.Errorf("retried first message of a Direct Conversation: %d %v", r.status, r.body)
	}
	cv, _ := s.Conversation(parent)
	dc, _ := s.Conversation(direct)
	if cv.DirectID != direct || dc.ParentID != parent {
		t.Errorf("link: parent %+v, direct %+v", cv, dc)
	}
	// Poppy 0.1 §7.10: "the Company adds a direct_opened event to the parent"
	evs := events(a.read(parent, "cursor="+cursor))
	if len(evs) != 1 || evs[0]["type"] != "direct_opened" || evs[0]["conversation_id"] != direct {
		t.Errorf("parent events %v", evs)
	}
	// The parent can be read, but takes no messages or handoff while the Direct Conversation is open.
	for _, r := range []response{
		a.send(parent, msg("meanwhile"), ""),
		a.request("POST", "/"+parent+"/handoff", "", map[string]any{}, nil),
		a.startDirect(parent, human("another")),
	} {
		wantConvError(t, r, 409, "direct_conversation_open")
		if r.str("conversation_id") != direct {
			t.Errorf("direct_conversation_open names %q, want %q", r.str("conversation_id"), direct)
		}
	}
	wantNoViolation(t, s, rt)

	// Closing the Direct Conversation reopens the parent for messages.
	wantStatus(t, a.request("POST", "/"+direct+"/close", "", map[string]any{}, nil), 200, poppytest.StatusClosed, poppytest.ResponderAgent)
	evs = events(a.read(parent, "cursor="+evs[0]["id"].(string)))
	if len(evs) != 1 || evs[0]["type"] != "direct_closed" || evs[0]["conversation_id"] != direct {
		t.Errorf("parent events after the close %v", evs)
	}
	if r := a.send(parent, msg("back"), ""); r.status != 202 {
		t.Errorf("parent after its Direct Conversation closed: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
}

func TestClosingParentClosesDirect(t *testing.T) {
	s, rt, a, parent, _ := newSettled(t, nil)
	direct := a.startDirect(parent, human("hi")).str("conversation_id")
	wantStatus(t, a.request("POST", "/"+parent+"/close", "", map[string]any{}, nil), 200, poppytest.StatusClosed, poppytest.ResponderAgent)
	if dc, _ := s.Conversation(direct); dc.Status != poppytest.StatusClosed {
		t.Errorf("Direct Conversation after its parent closed: %s", dc.Status)
	}
	wantConvError(t, a.send(direct, human("still there?"), ""), 409, "conversation_closed")
	// Poppy 0.1 §7.10: the parent "MUST be open"
	wantConvError(t, a.startDirect(parent, human("hi again")), 409, "conversation_closed")
	var types []string
	for _, e := range s.Events(parent) {
		types = append(types, e.Type)
	}
	if n := len(types); n < 3 || types[n-3] != "direct_opened" || types[n-2] != "direct_closed" || types[n-1] != "state" {
		t.Errorf("parent events %v", types)
	}
	wantNoViolation(t, s, rt)
}

func TestDirectConversationParents(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	wantConvError(t, a.startDirect("cnv_nope", human("hi")), 404, "conversation_not_found")
	wantConvError(t, a.startDirect("not/an/id", human("hi")), 404, "conversation_not_found")
	wantNoViolation(t, s, rt)

	parent := a.mustStart("hello")
	direct := a.startDirect(parent, human("hi")).str("conversation_id")
	// Poppy 0.1 §7.10: the parent MUST "not be a Direct Conversation itself"
	wantConvError(t, a.startDirect(direct, human("deeper")), 404, "conversation_not_found")
	wantViolation(t, s, rt, "§7.10", "itself a Direct Conversation")
}

func TestDirectConversationOfAnotherUser(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	parent := a.mustStart("hello")
	b := a.otherUser("usr_other")
	wantConvError(t, b.startDirect(parent, human("hi")), 404, "conversation_not_found")
	wantViolation(t, s, rt, "§7.2")
	if cv, _ := s.Conversation(parent); cv.DirectID != "" {
		t.Errorf("another User opened a Direct Conversation")
	}
}

func TestParentOnLaterMessage(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	r := a.request("POST", "/"+id+"/messages", "", map[string]any{"parent_conversation_id": id, "message": msg("hi")}, nil)
	wantConvError(t, r, 400, "invalid_request")
	wantViolation(t, s, rt, "§7.10")
}

func TestRequestUser(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	if err := s.RequestUser(id, "We need the customer's signature."); err != nil {
		t.Fatal(err)
	}
	ur := ofType(events(a.read(id, "")), "user_requested")
	if len(ur) != 1 || ur[0]["reason"] != "We need the customer's signature." {
		t.Errorf("user_requested events %v", ur)
	}
	wantNoViolation(t, s, rt)
}

func TestAddEvent(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	ev, err := s.AddEvent(id, poppytest.Event{Type: "example.com/gift-wrap"})
	if err != nil || ev.ID == "" {
		t.Fatalf("AddEvent = %+v, %v", ev, err)
	}
	m, err := s.AddEvent(id, poppytest.Event{Type: "message", Message: &poppytest.Message{Sender: "agent", Text: "A note."}})
	if err != nil || m.Message.Role != "company" || m.Message.ID == "" {
		t.Fatalf("AddEvent of a message = %+v, %v", m, err)
	}
	evs := events(a.read(id, ""))
	if n := len(evs); evs[n-2]["type"] != "example.com/gift-wrap" || evs[n-2]["id"] != ev.ID || evs[n-1]["message"].(map[string]any)["text"] != "A note." {
		t.Errorf("events %v", evs)
	}
	if _, err := s.AddEvent(id, poppytest.Event{Type: "state", Status: "idle"}); err == nil {
		t.Errorf("AddEvent of a state event succeeded")
	}
	wantNoViolation(t, s, rt)
}
