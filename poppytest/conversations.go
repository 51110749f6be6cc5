package poppytest

// This file implements the Company side of conversations (Poppy 0.1 §7) at
// the poppy entry's endpoint, https://api.<domain>/poppy/conversations:
// POST {endpoint} starts a conversation or a Direct Conversation (§7.3,
// §7.10), POST {endpoint}/{id}/messages continues one, POST .../handoff asks
// for a person (§7.9) and POST .../close ends it (§7.12). Every request is
// authenticated (§7.2, §4.3) and checked against the conversation's owner.
// Reads and streams are in conversations_read.go and sse.go, message
// parsing in conversations_msg.go, the Company Agent in companyagent.go and
// the test controls in conversations_knobs.go.

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Statuses and responders of a conversation (Poppy 0.1 §7.7).
const (
	StatusWorking  = "working" // the Company is preparing a reply
	StatusIdle     = "idle"    // waiting for the Personal Agent
	StatusQueued   = "queued"  // waiting for a person after a handoff
	StatusClosed   = "closed"  // no more messages
	ResponderAgent = "agent"   // the Company Agent
	ResponderHuman = "human"   // a person at the Company
)

// Message is one message of a conversation (Poppy 0.1 §7.4).
type Message struct {
	ID      string
	Role    string          // "company" for the Company's; Options.AgentRole for the Personal Agent's
	Sender  string          // "agent" or "human" (§7.8)
	Text    string          // "" when absent
	Data    json.RawMessage // nil when absent
	Context map[string]any  // only the Personal Agent sends it; nil when absent
	Time    time.Time
}

// Event is one event of a conversation (Poppy 0.1 §7.5). Type says which
// of the other fields are set.
type Event struct {
	ID   string
	Type string // "message", "state", "authorization", "user_requested", "direct_opened", "direct_closed"
	Time time.Time

	Message        *Message // message
	Status         string   // state
	Responder      string   // state
	Error          string   // authorization: "sign_in_required" or "insufficient_scope"
	Scope          string   // authorization: the scopes needed
	Reason         string   // user_requested
	ConversationID string   // direct_opened, direct_closed: the Direct Conversation
}

// Conversation is the Company's view of one conversation.
type Conversation struct {
	ID        string
	ParentID  string // for a Direct Conversation, the conversation it is linked to (§7.10)
	DirectID  string // the open Direct Conversation of this one; "" for none
	ClientID  string // the client_id that started it (§7.2)
	UserID    string // the User ID that started it (§7.2)
	Account   string // the account it belongs to once it used it (§7.2); "" before
	Status    string
	Responder string
	Context   map[string]any // the context so far; fields a message leaves out keep their values (§7.4)
	Created   time.Time
}

// convRecord is a conversation as the Server holds it; convState.mu guards it.
type convRecord struct {
	Conversation
	events   []Event       // held events, oldest first; ExpireCursors drops old ones
	messages []Message     // every message of the Personal Agent accepted, in order
	changed  chan struct{} // closed and replaced on every new event, to wake readers
	gen      int           // bumped by closing and by a person joining: cancels Company Agent turns in flight
	turns    int           // Company Agent turns in flight
	pending  *agentPending // an account task waiting for sign-in (§7.11)
}

// sentMessage is the first acceptance of a message ID (§7.3).
type sentMessage struct {
	conversationID string
	fingerprint    string // the request's target and canonical message
	started        bool   // it started the conversation: answered 201
}

// convState is every conversation of the Server and the test's fault knobs.
type convState struct {
	*Server
	*companyAgent // the scripted Company Agent (companyagent.go)
	*eventStreams // server-sent events (sse.go)

	// mu guards every field below and every convRecord. In convState's
	// methods, s.mu is this lock; s.Server.mu is the Server's.
	mu          sync.Mutex
	convs       map[string]*convRecord
	order       []string                // conversation IDs, in order of creation
	sent        map[string]*sentMessage // client_id, User ID and message ID -> first acceptance
	failPosts   int                     // FailNextPost
	dropPosts   int                     // DropConnectionAfterAccept
	downPosts   int                     // UnavailableNextPosts
	holdPost    *postHold               // HoldNextPost; nil: none
	dropStream  int                     // DropStreamAfter; -1: none
	floodDeltas int                     // FloodDeltas
	stopped     bool                    // the Server is closed: Company Agent turns still due do nothing
}

// installConversations sets up the shop and the conversation API.
func (s *convState) installConversations() {
	s.shop = newShop(s.Server, s.timeNow())
	s.convs, s.sent, s.dropStream = map[string]*convRecord{}, map[string]*sentMessage{}, -1
	s.t.Cleanup(s.stopConversations) // registered before Close, so it runs after it
	s.installConversationsOn("api." + s.domain)
}

// installConversationsOn registers the conversation API on the host api.
func (s *convState) installConversationsOn(api string) {
	base := conversationsPath
	s.HandleFunc(api, "POST "+base, s.handleStart)
	s.HandleFunc(api, "POST "+base+"/{id}/messages", s.handleMessage)
	s.HandleFunc(api, "GET "+base+"/{id}/events", s.handleEvents)
	s.HandleFunc(api, "POST "+base+"/{id}/handoff", s.handleHandoff)
	s.HandleFunc(api, "POST "+base+"/{id}/close", s.handleClose)
}

// stopConversations makes the Company Agent's turns still due do nothing.
func (s *convState) stopConversations() {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	s.convState.stopped = true
}

// accepted is what a POST that accepted a message answers.
type accepted struct {
	conversationID string
	status         int  // 201 or 202
	duplicate      bool // a retry of a message accepted before: nothing was added
	// convStatus and responder are the conversation's as the message was
	// accepted (empty for a retry: the answer then gives the current ones),
	// so the answer does not depend on how fast the Company Agent replies.
	convStatus, responder string
}

// handleStart starts a conversation with its first message (Poppy 0.1 §7.3),
// or a Direct Conversation (§7.10).
func (s *convState) handleStart(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Authenticate(w, r, "") // Poppy 0.1 §7.2: "Every request carries a Session Token with a DPoP Proof"
	if !ok {
		return
	}
	if s.unavailable(w, r) {
		return
	}
	q, e := parseReadQuery(r)
	if e == nil {
		var in *messageRequest
		if in, e = s.readMessageRequest(r, true); e == nil {
			var res accepted
			if res, e = s.startConversation(c, in, q); e == nil {
				s.answerPost(w, r, c, res, q)
				return
			}
		}
	}
	s.writeConvError(w, r, e)
}

// handleMessage adds a message to a conversation (Poppy 0.1 §7.3).
func (s *convState) handleMessage(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Authenticate(w, r, "")
	if !ok {
		return
	}
	if s.unavailable(w, r) {
		return
	}
	id := r.PathValue("id")
	e := s.withConv(id, c, func(*convRecord) *convError { return nil })
	var q readQuery
	if e == nil {
		q, e = parseReadQuery(r)
	}
	if e == nil {
		var in *messageRequest
		if in, e = s.readMessageRequest(r, false); e == nil {
			var res accepted
			if res, e = s.continueConversation(id, c, in, q); e == nil {
				s.answerPost(w, r, c, res, q)
				return
			}
		}
	}
	s.writeConvError(w, r, e)
}

// startConversation accepts the first message of a new conversation, or
// returns the conversation a retry of it started.
func (s *convState) startConversation(c *Caller, in *messageRequest, q readQuery) (accepted, *convError) {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	fp := "start " + in.parentID + "\x00" + in.canonical
	if res, e, found := s.retried(c, in.msg.ID, fp, q); found {
		return res, e
	}
	if q.hasCursor {
		return accepted{}, newConvError("cursor_expired", "cursor %q is not an event of this conversation", q.cursor)
	}
	var parent *convRecord
	if in.hasParent {
		var e *convError
		if parent, e = s.parentFor(in.parentID, c); e != nil {
			return accepted{}, e
		}
	}
	cv := &convRecord{Conversation: Conversation{ID: "cnv_" + randomString(9), ClientID: c.ClientID, UserID: c.UserID,
		Responder: ResponderAgent, Context: map[string]any{}, Created: s.timeNow()}, changed: make(chan struct{})}
	st.convs[cv.ID] = cv
	st.order = append(st.order, cv.ID)
	if parent != nil {
		cv.ParentID, cv.Account = parent.ID, parent.Account
		parent.DirectID = cv.ID
		// Poppy 0.1 §7.10: "When a Direct Conversation opens, the Company adds a direct_opened event to the parent"
		s.addEvent(parent, Event{Type: "direct_opened", ConversationID: cv.ID})
	}
	st.sent[sentKey(c, in.msg.ID)] = &sentMessage{conversationID: cv.ID, fingerprint: fp, started: true}
	s.acceptMessage(cv, c, in.msg)
	return accepted{conversationID: cv.ID, status: http.StatusCreated, convStatus: cv.Status, responder: cv.Responder}, nil
}

// parentFor checks the parent of a new Direct Conversation (Poppy 0.1 §7.10).
// The caller holds st.mu.
func (s *convState) parentFor(id string, c *Caller) (*convRecord, *convError) {
	p := s.convState.convs[id]
	if p == nil {
		return nil, newConvError("conversation_not_found", "no conversation %s", id)
	}
	if e := s.ownerError(p, c); e != nil {
		return nil, e
	}
	switch {
	case p.ParentID != "":
		// Poppy 0.1 §7.10: the parent "MUST ... not be a Direct Conversation itself"
		return nil, convBug("7.10", "conversation_not_found", "parent %s is itself a Direct Conversation", id)
	case p.Status == StatusClosed:
		// Poppy 0.1 §7.10: "The parent conversation MUST be open"
		return nil, newConvError("conversation_closed", "parent %s is closed", id)
	case p.DirectID != "":
		// Poppy 0.1 §7.10: "It can have one open Direct Conversation at a time."
		e := newConvError("direct_conversation_open", "parent %s already has an open Direct Conversation", id)
		e.conversationID = p.DirectID
		return nil, e
	}
	return p, nil
}

// continueConversation accepts a later message (Poppy 0.1 §7.3).
func (s *convState) continueConversation(id string, c *Caller, in *messageRequest, q readQuery) (accepted, *convError) {
	st := s.convState
	st.mu.Lock()
	defer st.mu.Unlock()
	cv, e := s.lookupConv(id, c)
	if e != nil {
		return accepted{}, e
	}
	fp := "message " + id + "\x00" + in.canonical
	if res, e, found := s.retried(c, in.msg.ID, fp, q); found {
		return res, e
	}
	if e := checkCursor(cv, q); e != nil {
		return accepted{}, e
	}
	if e := takesMessages(cv); e != nil {
		return accepted{}, e
	}
	st.sent[sentKey(c, in.msg.ID)] = &sentMessage{conversationID: id, fingerprint: fp}
	s.acceptMessage(cv, c, in.msg)
	return accepted{conversationID: id, status: http.StatusAccepted, convStatus: cv.Status, responder: cv.Responder}, nil
}

// takesMessages reports why cv takes no messages or handoff requests now.
func takesMessages(cv *convRecord) *convError {
	switch {
	case cv.Status == StatusClosed:
		// Poppy 0.1 §7.12: "A closed conversation takes no more messages"
		return newConvError("conversation_closed", "conversation %s is closed", cv.ID)
	case cv.DirectID != "":
		// Poppy 0.1 §7.10: messages and handoff requests to the parent "return direct_conversation_open, with the Direct Conversation's ID in conversation_id"
		e := newConvError("direct_conversation_open", "conversation %s has an open Direct Conversation", cv.ID)
		e.conversationID = cv.DirectID
		return e
	}
	return nil
}

// sentKey keys message IDs by User (Poppy 0.1 §7.3: "MUST make it unique for the User").
func sentKey(c *Caller, messageID string) string {
	return c.ClientID + "\x00" + c.UserID + "\x00" + messageID
}

// retried looks a message ID up. found is false for a new ID. The caller
// holds st.mu.
func (s *convState) retried(c *Caller, messageID, fp string, q readQuery) (accepted, *convError, bool) {
	prev := s.convState.sent[sentKey(c, messageID)]
	if prev == nil || s.flaws().DuplicateMessages {
		return accepted{}, nil, false
	}
	if prev.fingerprint != fp {
		// Poppy 0.1 §7.3: "If the content is different, the Company returns message_id_conflict."
		return accepted{}, convBug("7.3", "message_id_conflict", "message ID %s was accepted before with other content", messageID), true
	}
	cv, e := s.lookupConv(prev.conversationID, c)
	if e == nil {
		e = checkCursor(cv, q)
	}
	if e != nil {
		return accepted{}, e, true
	}
	// Poppy 0.1 §7.3: "it returns the original response and doesn't add the message again"
	res := accepted{conversationID: cv.ID, status: http.StatusAccepted, duplicate: true}
	if prev.started {
		res.status = http.StatusCreated // "the Company can recognize a retried first message and return the conversation it already started"
	}
	return res, nil, true
}

// acceptMessage adds a message of the Personal Agent to cv and lets the
// Company Agent answer it. The caller holds st.mu.
func (s *convState) acceptMessage(cv *convRecord, c *Caller, m Message) {
	m.Role, m.Time = s.agentRole(), s.timeNow()
	cv.messages = append(cv.messages, m)
	for k, v := range m.Context {
		cv.Context[k] = v // Poppy 0.1 §7.4: "fields it leaves out keep their previous values"
	}
	s.addEvent(cv, Event{Type: "message", Message: &m})
	first := cv.Status == ""
	if first {
		cv.Status, cv.Responder = StatusIdle, ResponderAgent // its state event follows
	}
	switch {
	case cv.Responder != ResponderAgent || cv.Status == StatusQueued:
		// a person has joined or is awaited: the Company Agent stays quiet
	case m.Text != "" || m.Data != nil:
		s.startTurn(cv, agentTask{caller: c, text: m.Text, data: m.Data})
	default:
		s.resumePending(cv, c) // a context-only message says nothing, but carries the new token
	}
	if first && cv.Status == StatusIdle {
		s.addEvent(cv, Event{Type: "state", Status: cv.Status, Responder: cv.Responder})
	}
}

// agentRole is the role of the Personal Agent's messages (Options.AgentRole).
func (s *convState) agentRole() string {
	return orDefault(s.opts.AgentRole, "personal_agent")
}

// answerPost writes the answer to a POST that accepted a message: the
// status and responder, and a read of the events when the request asked
// for one with wait or cursor (Poppy 0.1 §7.3 "Replies in the response").
// FailNextPost and DropConnectionAfterAccept act here, after the message
// was accepted, so the agent must retry it with the same ID.
func (s *convState) answerPost(w http.ResponseWriter, r *http.Request, c *Caller, res accepted, q readQuery) {
	if !res.duplicate && s.takeFault(&s.convState.failPosts) {
		s.writeConvError(w, r, &convError{code: "server_error", desc: "poppytest: FailNextPost", status: http.StatusServiceUnavailable})
		return
	}
	if !res.duplicate && s.takeFault(&s.convState.dropPosts) {
		panic(http.ErrAbortHandler) // closes the connection (HTTP/1.1) or resets the stream (HTTP/2) without a response
	}
	if h := s.takeHold(res.duplicate); h != nil {
		close(h.held)
		select {
		case <-h.release:
		case <-r.Context().Done(): // the agent gave up, or died
			return
		}
	}
	if !q.hasWait && !q.hasCursor {
		st := s.convState
		st.mu.Lock()
		cv := st.convs[res.conversationID]
		body := statusResponse{ConversationID: cv.ID, Status: cv.Status, Responder: cv.Responder}
		st.mu.Unlock()
		if res.convStatus != "" {
			body.Status, body.Responder = res.convStatus, res.responder
		}
		writeJSON(w, res.status, body)
		return
	}
	// Poppy 0.1 §7.3: "responds as a read of the conversation's events from that cursor would ... The status code stays 201 or 202"
	body, e := s.readEvents(r.Context(), res.conversationID, c, q, true)
	if e != nil {
		s.writeConvError(w, r, e)
		return
	}
	writeJSON(w, res.status, body)
}

// takeFault takes one from a fault counter, reporting whether it was set.
func (s *convState) takeFault(n *int) bool {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	if *n <= 0 {
		return false
	}
	*n--
	return true
}

// statusResponse is the answer to a POST without a read (Poppy 0.1 §7.3, §7.9, §7.12).
type statusResponse struct {
	ConversationID string `json:"conversation_id,omitempty"`
	Status         string `json:"status"`
	Responder      string `json:"responder"`
}

// handleHandoff asks for a person at the Company (Poppy 0.1 §7.9).
func (s *convState) handleHandoff(w http.ResponseWriter, r *http.Request) {
	s.handleControl(w, r, "7.9", func(cv *convRecord) (int, *convError) {
		if e := takesMessages(cv); e != nil {
			return 0, e
		}
		if cv.Status != StatusQueued && cv.Responder == ResponderAgent {
			s.handOff(cv) // Poppy 0.1 §7.9: "the status becomes queued while it finds someone"
		}
		return http.StatusAccepted, nil
	})
}

// handleClose closes a conversation (Poppy 0.1 §7.12).
func (s *convState) handleClose(w http.ResponseWriter, r *http.Request) {
	s.handleControl(w, r, "7.12", func(cv *convRecord) (int, *convError) {
		s.closeConv(cv) // closing a closed conversation changes nothing
		return http.StatusOK, nil
	})
}

// handleControl runs a POST whose body is an empty JSON object: it
// authenticates, finds the conversation, reads the body, calls do under
// the lock and answers status and responder.
func (s *convState) handleControl(w http.ResponseWriter, r *http.Request, section string, do func(*convRecord) (int, *convError)) {
	c, ok := s.Authenticate(w, r, "")
	if !ok {
		return
	}
	id := r.PathValue("id")
	e := s.withConv(id, c, func(*convRecord) *convError { return nil })
	if e == nil {
		e = s.readEmptyObject(r, section)
	}
	var body statusResponse
	status := 0
	if e == nil {
		e = s.withConv(id, c, func(cv *convRecord) *convError {
			var e *convError
			if status, e = do(cv); e == nil {
				body = statusResponse{Status: cv.Status, Responder: cv.Responder}
			}
			return e
		})
	}
	if e != nil {
		s.writeConvError(w, r, e)
		return
	}
	writeJSON(w, status, body)
}

// withConv runs f on the conversation id under the lock, after checking
// the caller may use it.
func (s *convState) withConv(id string, c *Caller, f func(*convRecord) *convError) *convError {
	s.convState.mu.Lock()
	defer s.convState.mu.Unlock()
	cv, e := s.lookupConv(id, c)
	if e != nil {
		return e
	}
	return f(cv)
}

// lookupConv finds the conversation id and checks the caller against its
// owner. The caller holds st.mu.
func (s *convState) lookupConv(id string, c *Caller) (*convRecord, *convError) {
	cv := s.convState.convs[id]
	if cv == nil {
		return nil, newConvError("conversation_not_found", "no conversation %s", id)
	}
	return cv, s.ownerError(cv, c)
}

// ownerError checks the caller against the conversation's owner (Poppy 0.1
// §7.2): the client_id and User ID that started it, or once it used the
// account, that account.
func (s *convState) ownerError(cv *convRecord, c *Caller) *convError {
	switch {
	case c.ClientID != cv.ClientID:
		// Poppy 0.1 §7.2: "The Company MUST reject requests from any other client_id, User, or account."
		return convBug("7.2", "conversation_not_found", "conversation %s belongs to another client_id", cv.ID)
	case cv.Account == "" && c.UserID == cv.UserID:
		return nil
	case cv.Account == "":
		return convBug("7.2", "conversation_not_found", "conversation %s belongs to another User", cv.ID)
	case c.SignedIn && c.Account == cv.Account:
		return nil // Poppy 0.1 §7.2: "Once it uses the User's account, it belongs to that account instead."
	case c.UserID == cv.UserID:
		// Poppy 0.1 §7.11: "a request on it from a token for the same User that isn't signed in to that account ... gets sign_in_required"
		return newConvError("sign_in_required", "conversation %s uses an account this token is not signed in to", cv.ID)
	}
	return convBug("7.2", "conversation_not_found", "conversation %s belongs to an account the caller is not signed in to", cv.ID)
}
