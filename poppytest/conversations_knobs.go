package poppytest

// This file holds the test's side of conversations: what the Company holds
// (Conversations, Messages, Events), the Company's own actions (a Person
// who joins, closing, asking for the User) and the fault knobs
// (FailNextPost, DropConnectionAfterAccept, UnavailableNextPosts,
// HoldNextPost, ExpireCursors,
// DropStreamAfter, FloodDeltas).

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
)

// Conversations returns a copy of every conversation, in order of creation.
func (s *convState) Conversations() []Conversation {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]Conversation, 0, len(st.order))
	for _, id := range st.order {
		out = append(out, st.convs[id].snapshot())
	}
	return out
}

// Conversation returns a copy of the conversation id.
func (s *convState) Conversation(id string) (Conversation, bool) {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	cv := st.convs[id]
	if cv == nil {
		return Conversation{}, false
	}
	return cv.snapshot(), true
}

// snapshot copies the conversation; the caller holds st.mu.
func (cv *convRecord) snapshot() Conversation {
	c := cv.Conversation
	c.Context = maps.Clone(cv.Context)
	return c
}

// Messages returns every message of the Personal Agent the Company accepted
// in the conversation, in order: a retried message counts once.
func (s *convState) Messages(conversationID string) []Message {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	if cv := st.convs[conversationID]; cv != nil {
		return slices.Clone(cv.messages)
	}
	return nil
}

// Events returns the events the Company still holds for the conversation,
// oldest first.
func (s *convState) Events(conversationID string) []Event {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	cv := st.convs[conversationID]
	if cv == nil {
		return nil
	}
	out := slices.Clone(cv.events)
	for i := range out {
		if m := out[i].Message; m != nil {
			mc := *m
			out[i].Message = &mc
		}
	}
	return out
}

// CloseConversation closes the conversation from the Company's side (Poppy
// 0.1 §7.12: "The Company can also close a conversation"), with its open
// Direct Conversation.
func (s *convState) CloseConversation(id string) error {
	return s.companyAction(id, func(cv *convRecord) error {
		s.closeConv(cv)
		return nil
	})
}

// RequestUser has the Company ask for the User with a user_requested event
// (Poppy 0.1 §7.10 "When the Company asks").
func (s *convState) RequestUser(conversationID, reason string) error {
	return s.companyAction(conversationID, func(cv *convRecord) error {
		if cv.Status == StatusClosed {
			return fmt.Errorf("poppytest: conversation %s is closed", cv.ID)
		}
		s.addEvent(cv, Event{Type: "user_requested", Reason: reason})
		return nil
	})
}

// AddEvent adds ev to the conversation as the Company and returns it with
// its new ID and time: an event the script does not make, or of a type the
// spec does not define, which agents must skip (Poppy 0.1 §7.5). Type is
// required. State events are refused: status and responder change through
// the Person, the Company Agent and closing. A message's ID and role are
// set when empty (role "company").
func (s *convState) AddEvent(conversationID string, ev Event) (Event, error) {
	var out Event
	err := s.companyAction(conversationID, func(cv *convRecord) error {
		switch {
		case ev.Type == "" || ev.Type == "state":
			return fmt.Errorf("poppytest: AddEvent of type %q", ev.Type)
		case cv.Status == StatusClosed:
			return fmt.Errorf("poppytest: conversation %s is closed", cv.ID)
		}
		if ev.Message != nil {
			m := *ev.Message
			m.ID, m.Role, m.Time = orDefault(m.ID, "msg_"+randomString(9)), orDefault(m.Role, "company"), s.timeNow()
			ev.Message = &m
		}
		s.addEvent(cv, ev)
		out = cv.events[len(cv.events)-1]
		return nil
	})
	return out, err
}

// companyAction runs f on the conversation id under the lock.
func (s *convState) companyAction(id string, f func(cv *convRecord) error) error {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	cv := st.convs[id]
	if cv == nil {
		return fmt.Errorf("poppytest: no conversation %s", id)
	}
	return f(cv)
}

// closeConv closes cv and its open Direct Conversation (Poppy 0.1 §7.10:
// "Closing the parent also closes its open Direct Conversation"). The
// caller holds st.mu.
func (s *convState) closeConv(cv *convRecord) {
	if cv.Status == StatusClosed {
		return
	}
	if d := s.convState.convs[cv.DirectID]; d != nil {
		s.closeConv(d)
	}
	cv.gen++ // Poppy 0.1 §7.12: the Company "cancels any pending handoff"; the Company Agent stops too
	cv.turns, cv.pending = 0, nil
	// Poppy 0.1 §7.12: "The Company adds a state event with status: "closed""; §7.7: "In a closed conversation, responder is whoever handled it last."
	s.setState(cv, StatusClosed, cv.Responder)
	if p := s.convState.convs[cv.ParentID]; p != nil && p.DirectID == cv.ID {
		p.DirectID = ""
		// Poppy 0.1 §7.10: "When the Direct Conversation closes, the Company adds a direct_closed event to the parent"
		s.addEvent(p, Event{Type: "direct_closed", ConversationID: cv.ID})
	}
}

// Person is a person at the Company in one conversation, driven by the
// test (Poppy 0.1 §7.7, §7.9). Its methods are safe for concurrent use.
type Person struct {
	s  *Server
	id string
}

// Person returns the person at the Company for the conversation. The
// conversation need not exist yet.
func (s *convState) Person(conversationID string) *Person {
	return &Person{s: s.Server, id: conversationID}
}

// Join has the person join: responder becomes human and status idle, and
// the Company Agent stops (a pending handoff is answered). Joining twice
// changes nothing.
func (p *Person) Join() error {
	return p.s.companyAction(p.id, func(cv *convRecord) error {
		if cv.Status == StatusClosed {
			return fmt.Errorf("poppytest: conversation %s is closed", cv.ID)
		}
		if cv.Responder == ResponderHuman {
			return nil
		}
		cv.gen++ // the Company Agent's turns in flight are dropped
		cv.turns = 0
		// Poppy 0.1 §7.9: "When a person joins, responder becomes human."
		p.s.setState(cv, StatusIdle, ResponderHuman)
		return nil
	})
}

// Say adds a message from the person, with sender human (Poppy 0.1 §7.7).
func (p *Person) Say(text string) error {
	return p.s.companyAction(p.id, func(cv *convRecord) error {
		if err := p.present(cv); err != nil {
			return err
		}
		p.s.addCompanyMessage(cv, ResponderHuman, text, nil)
		return nil
	})
}

// Leave has the person leave, saying reason first unless it is empty: the
// Company Agent takes over again, with status idle.
func (p *Person) Leave(reason string) error {
	return p.s.companyAction(p.id, func(cv *convRecord) error {
		if err := p.present(cv); err != nil {
			return err
		}
		if reason != "" {
			p.s.addCompanyMessage(cv, ResponderHuman, reason, nil)
		}
		p.s.setState(cv, StatusIdle, ResponderAgent)
		return nil
	})
}

// present reports why the person cannot speak in cv.
func (p *Person) present(cv *convRecord) error {
	switch {
	case cv.Status == StatusClosed:
		return fmt.Errorf("poppytest: conversation %s is closed", cv.ID)
	case cv.Responder != ResponderHuman:
		return fmt.Errorf("poppytest: no person has joined conversation %s", cv.ID)
	}
	return nil
}

// FailNextPost makes the next n message POSTs (starting or continuing a
// conversation) accept the message and then answer 503, so the agent must
// retry with the same message ID, and the retry must be recognized (Poppy
// 0.1 §7.3). Retries of an accepted message do not count.
func (s *convState) FailNextPost(n int) {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	s.convState.failPosts = n
}

// DropConnectionAfterAccept makes the next n message POSTs accept the
// message and then break the connection (HTTP/1.1) or reset the stream
// (HTTP/2) without an answer. Retries of an accepted message do not count.
func (s *convState) DropConnectionAfterAccept(n int) {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	s.convState.dropPosts = n
}

// UnavailableNextPosts makes the next n message POSTs (starting or
// continuing a conversation), retries included, answer 503 before the
// message is looked at: the Company is down, and the message is not
// accepted. Each of them is recorded (Count), so a test can tell how many
// times the agent tried.
func (s *convState) UnavailableNextPosts(n int) {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	s.convState.downPosts = n
}

// unavailable answers 503 when UnavailableNextPosts applies to the request.
func (s *convState) unavailable(w http.ResponseWriter, r *http.Request) bool {
	if !s.takeFault(&s.convState.downPosts) {
		return false
	}
	s.writeConvError(w, r, &convError{code: "server_error", desc: "poppytest: UnavailableNextPosts", status: http.StatusServiceUnavailable})
	return true
}

// postHold is a message POST's answer held back (HoldNextPost).
type postHold struct {
	held    chan struct{} // closed once a POST accepted its message and waits
	release chan struct{} // closed by the test to let the answer go
	once    sync.Once
}

// HoldNextPost makes the next message POST (starting or continuing a
// conversation) accept the message and then hold its answer until release
// is called or the request ends (the agent gave up, or died), so that a
// test can stop the agent while its message is in flight. held is closed
// once such a POST has accepted its message. Retries of an accepted
// message are not held.
func (s *convState) HoldNextPost() (held <-chan struct{}, release func()) {
	h := &postHold{held: make(chan struct{}), release: make(chan struct{})}
	s.convState.mu.Lock()
	s.convState.holdPost = h
	s.convState.mu.Unlock()
	return h.held, func() { h.once.Do(func() { close(h.release) }) }
}

// takeHold returns the hold a new message's POST must wait on, once.
func (s *convState) takeHold(duplicate bool) *postHold {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	h := s.convState.holdPost
	if duplicate || h == nil {
		return nil
	}
	s.convState.holdPost = nil
	return h
}

// ExpireCursors makes the Company forget every event of every conversation
// but the newest one, so a cursor naming any other gets cursor_expired
// (Poppy 0.1 §7.5) and a read from the beginning misses the rest.
func (s *convState) ExpireCursors() {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, cv := range st.convs {
		if n := len(cv.events); n > 1 {
			cv.events = slices.Clone(cv.events[n-1:])
		}
	}
}

// DropStreamAfter makes the next event stream opened break after n events
// (Poppy 0.1 §7.6). When the event that would follow is a Company message,
// the stream first sends the first text-delta piece of it, so the agent
// holds part of a message it must drop.
func (s *convState) DropStreamAfter(n int) {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	s.convState.dropStream = n
}

// FloodDeltas makes the next event stream opened send n text-delta pieces
// first (Poppy 0.1 §7.6), each of a new message that never comes whole: a
// hostile Company trying to make the agent keep or show pieces without
// bound. The stream then goes on as usual.
func (s *convState) FloodDeltas(n int) {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	s.convState.floodDeltas = n
}
