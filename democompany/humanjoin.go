package democompany

// This file is the demo Company's person: someone of the Company who joins
// every handoff by themself and answers the agent, as the person behind a
// real Company's handoff would, where no test drives a poppytest.Person.

import (
	"cmp"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// HumanJoin has a person of the Company join every handoff (Poppy 0.1 §7.9)
// by themself: After past the handoff, if the conversation is still queued,
// they join (responder human, status idle) and say Greeting; then, while a
// person is in the conversation, each message of the Personal Agent gets
// Reply from them after ReplyAfter. Set Watch as the Server's
// poppytest.Options.OnEvent and call Attend with the Server once it is
// built. The zero value joins after five seconds with the default texts.
// Its methods are safe for concurrent use.
type HumanJoin struct {
	After      time.Duration // zero: 5 s; negative: at once
	Greeting   string        // zero: a greeting from Alex, a person of the demo Company
	Reply      string        // zero: a reply saying Alex is the demo's stand-in
	ReplyAfter time.Duration // zero: 50 ms, as the Company Agent takes; negative: at once

	// mu guards every field below. It is taken inside the Server's
	// conversation lock (Watch) and never held while calling the Server.
	mu      sync.Mutex
	srv     *poppytest.Server
	seen    map[string]poppytest.Event // conversation ID -> its latest state event
	stopped bool
}

const (
	defaultJoinAfter  = 5 * time.Second
	defaultReplyAfter = 50 * time.Millisecond
	defaultGreeting   = "Hi, I'm Alex, a person on Example Company's team. I can see this conversation: how can I help?"
	defaultReply      = "Thanks, I have noted that. (I am the demo Company's stand-in person and answer every message this way; " +
		"close this conversation and start another to talk with the Company Agent again.)"
)

// Attend makes srv the Company whose conversations the person joins.
func (h *HumanJoin) Attend(srv *poppytest.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.srv = srv
}

// Stop makes the person stop: nothing scheduled happens any more.
func (h *HumanJoin) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
}

// Watch is the Server's poppytest.Options.OnEvent: it follows each
// conversation's state, joins a handoff and answers the agent's messages.
// It only schedules, since the Server holds its lock while it runs.
func (h *HumanJoin) Watch(conversationID string, e poppytest.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]poppytest.Event{}
	}
	state := h.seen[conversationID]
	switch {
	case e.Type == "state" && e.Status == poppytest.StatusClosed:
		delete(h.seen, conversationID)
	case e.Type == "state":
		h.seen[conversationID] = e
		if e.Status == poppytest.StatusQueued {
			h.later(conversationID, max(cmp.Or(h.After, defaultJoinAfter), 0), func(p *poppytest.Person) { h.join(conversationID, p) })
		}
	case e.Type == "message" && e.Message.Role != "company" &&
		state.Responder == poppytest.ResponderHuman && state.Status != poppytest.StatusQueued:
		// Poppy 0.1 §7.7: "Each Company message MUST also include sender, with agent or human";
		// Person.Say sends sender human, and refuses once the person has left or the conversation closed.
		h.later(conversationID, max(cmp.Or(h.ReplyAfter, defaultReplyAfter), 0), func(p *poppytest.Person) { p.Say(cmp.Or(h.Reply, defaultReply)) })
	}
}

// join has the person join conversationID if it is still queued: answered
// meanwhile, a test's Person joined or the handoff ended.
func (h *HumanJoin) join(conversationID string, p *poppytest.Person) {
	c, ok := h.server().Conversation(conversationID)
	if !ok || c.Status != poppytest.StatusQueued {
		return
	}
	// Poppy 0.1 §7.9: "When a person joins, responder becomes human."
	if p.Join() == nil {
		p.Say(cmp.Or(h.Greeting, defaultGreeting))
	}
}

// later runs f with the person of conversationID after d, unless the
// person stopped meanwhile. The caller holds h.mu.
func (h *HumanJoin) later(conversationID string, d time.Duration, f func(*poppytest.Person)) {
	time.AfterFunc(d, func() {
		h.mu.Lock()
		srv, stopped := h.srv, h.stopped
		h.mu.Unlock()
		if srv != nil && !stopped {
			f(srv.Person(conversationID))
		}
	})
}

// server is the Server attended.
func (h *HumanJoin) server() *poppytest.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv
}
