package main

// This file is the admin API's view of a run's conversations (Poppy 0.1
// §7) and of a person at the Company who joins one, says something, and
// leaves (§7.7, §7.9), with the wire forms of what the admin API returns
// about the Company's state.

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// Wire forms of the Company's records.
type (
	sessionWire struct {
		ID       string    `json:"id"`
		ClientID string    `json:"client_id"`
		UserID   string    `json:"user_id"`
		Account  string    `json:"account,omitempty"`
		SignedIn bool      `json:"signed_in"`
		Scopes   []string  `json:"scopes"`
		Ended    bool      `json:"ended"`
		Created  time.Time `json:"created_at"`
	}
	requestWire struct {
		Method string    `json:"method"`
		Host   string    `json:"host"`
		Path   string    `json:"path"`
		Time   time.Time `json:"time"`
	}
	conversationWire struct {
		ID        string    `json:"id"`
		ParentID  string    `json:"parent_id,omitempty"`
		DirectID  string    `json:"direct_id,omitempty"`
		ClientID  string    `json:"client_id"`
		Account   string    `json:"account,omitempty"`
		Status    string    `json:"status"`
		Responder string    `json:"responder"`
		Created   time.Time `json:"created_at"`
		// Messages are the agent's messages the Company accepted, and
		// Events what the Company holds, in the detail only.
		Messages []messageWire `json:"messages,omitempty"`
		Events   []eventWire   `json:"events,omitempty"`
	}
	messageWire struct {
		ID      string          `json:"id"`
		Role    string          `json:"role,omitempty"`
		Sender  string          `json:"sender"`
		Text    string          `json:"text,omitempty"`
		Data    json.RawMessage `json:"data,omitempty"`
		Context map[string]any  `json:"context,omitempty"`
		Time    time.Time       `json:"time"`
	}
	eventWire struct {
		ID             string       `json:"id"`
		Type           string       `json:"type"`
		Time           time.Time    `json:"time"`
		Message        *messageWire `json:"message,omitempty"`
		Status         string       `json:"status,omitempty"`
		Responder      string       `json:"responder,omitempty"`
		Error          string       `json:"error,omitempty"`
		Scope          string       `json:"scope,omitempty"`
		Reason         string       `json:"reason,omitempty"`
		ConversationID string       `json:"conversation_id,omitempty"`
	}
)

func toConversation(c poppytest.Conversation) conversationWire {
	return conversationWire{ID: c.ID, ParentID: c.ParentID, DirectID: c.DirectID, ClientID: c.ClientID,
		Account: c.Account, Status: c.Status, Responder: c.Responder, Created: c.Created}
}

func toMessage(m poppytest.Message) messageWire {
	return messageWire{ID: m.ID, Role: m.Role, Sender: m.Sender, Text: m.Text, Data: m.Data, Context: m.Context, Time: m.Time}
}

func (a *admin) conversations(_ *http.Request, s *poppytest.Server) (int, any, error) {
	out := []conversationWire{}
	for _, c := range s.Conversations() {
		out = append(out, toConversation(c))
	}
	return http.StatusOK, map[string]any{"conversations": out}, nil
}

func (a *admin) conversation(r *http.Request, s *poppytest.Server) (int, any, error) {
	c, ok := s.Conversation(r.PathValue("id"))
	if !ok {
		return 0, nil, notFound("no conversation " + r.PathValue("id"))
	}
	out := toConversation(c)
	out.Messages, out.Events = []messageWire{}, []eventWire{}
	for _, m := range s.Messages(c.ID) {
		out.Messages = append(out.Messages, toMessage(m))
	}
	for _, e := range s.Events(c.ID) {
		ev := eventWire{ID: e.ID, Type: e.Type, Time: e.Time, Status: e.Status, Responder: e.Responder,
			Error: e.Error, Scope: e.Scope, Reason: e.Reason, ConversationID: e.ConversationID}
		if e.Message != nil {
			m := toMessage(*e.Message)
			ev.Message = &m
		}
		out.Events = append(out.Events, ev)
	}
	return http.StatusOK, out, nil
}

// personJoin has a person join the conversation, and say something first
// if the body says so: {"say": "Hi, I'm Ana."}.
func (a *admin) personJoin(r *http.Request, s *poppytest.Server) (int, any, error) {
	var body struct {
		Say string `json:"say"`
	}
	if err := readBody(r, &body, true); err != nil {
		return 0, nil, err
	}
	p := s.Person(r.PathValue("id"))
	if err := p.Join(); err != nil {
		return 0, nil, fromServer(err)
	}
	if body.Say != "" {
		if err := p.Say(body.Say); err != nil {
			return 0, nil, fromServer(err)
		}
	}
	return http.StatusOK, map[string]string{"responder": poppytest.ResponderHuman}, nil
}

// personSay has the person who joined say {"text": ...}.
func (a *admin) personSay(r *http.Request, s *poppytest.Server) (int, any, error) {
	var body struct {
		Text string `json:"text"`
	}
	if err := readBody(r, &body, false); err != nil {
		return 0, nil, err
	}
	if body.Text == "" {
		return 0, nil, badRequest(`want {"text": "what the person says"}`)
	}
	if err := s.Person(r.PathValue("id")).Say(body.Text); err != nil {
		return 0, nil, fromServer(err)
	}
	return http.StatusOK, map[string]string{"status": "said"}, nil
}

// personLeave has the person leave, saying {"reason": ...} first if given;
// the Company Agent takes over again.
func (a *admin) personLeave(r *http.Request, s *poppytest.Server) (int, any, error) {
	var body struct {
		Reason string `json:"reason"`
	}
	if err := readBody(r, &body, true); err != nil {
		return 0, nil, err
	}
	if err := s.Person(r.PathValue("id")).Leave(body.Reason); err != nil {
		return 0, nil, fromServer(err)
	}
	return http.StatusOK, map[string]string{"responder": poppytest.ResponderAgent}, nil
}
