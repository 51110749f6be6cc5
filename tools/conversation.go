// This file is the conversations capability (Poppy 0.1 §7): the tools
// send_message, read_events, request_human, start_direct_conversation,
// close_conversation and list_conversations, the Trackers that keep each
// Company's conversations, and how a tool call finds its conversation. The
// model passes a conversation ID; the store maps it back to its Company.
// Handlers are in conversation_run.go, results in conversation_result.go,
// progress notifications in conversation_progress.go.

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// conversations is the conversations capability. Each person holds one
// conversation Tracker per Company and User (agent.Company.Tracker), so
// that calls on one conversation share its locks whichever Session they
// use. It is safe for concurrent use.
type conversations struct {
	sessions  *sessions
	signIn    *signIn           // what to do when the Company asks for a sign-in
	companies *companies        // the sign-in types a Company offers
	store     *store.Store      // the conversations held; nil: none (no identity)
	mcp       *server.MCPServer // progress notifications while a call waits
	log       *slog.Logger
	now       func() time.Time
}

// Waits of the conversation tools.
const (
	convMaxWait         = 60 * time.Second // Poppy 0.1 §7.5: the Company "MAY ... cap wait"
	convDefaultSendWait = 20 * time.Second
	convDefaultReadWait = 10 * time.Second
)

// sendMessageArgs are send_message's arguments.
type sendMessageArgs struct {
	companyArgs
	ConversationID string          `json:"conversation_id,omitempty" jsonschema:"Continue this conversation; omit to start a new one"`
	Text           string          `json:"text,omitempty" jsonschema:"The message in plain sentences, no JSON or markup"`
	Data           json.RawMessage `json:"data,omitempty" jsonschema:"Structured details that would need markup in text (order numbers, travelers)"`
	Context        *messageContext `json:"context,omitempty" schema:"open" jsonschema:"Facts about the user's situation; fields left out keep their earlier values"`
	FromUser       bool            `json:"from_user,omitempty" jsonschema:"true only when text is the user's own words, unchanged; a summary is not"`
	WaitSeconds    *integer        `json:"wait_seconds,omitempty" schema:"minimum=0,maximum=60" jsonschema:"How long to wait for the Company (default 20)"`
}

// conversationArgs name a conversation: by its ID, with the Company's
// domain for one poppy-mcp does not hold. They are the arguments of
// request_human and close_conversation, and the first of read_events'.
type conversationArgs struct {
	ConversationID string `json:"conversation_id" jsonschema:"The conversation's ID, as a conversation tool returned it"`
	Domain         string `json:"domain,omitempty" jsonschema:"The Company's domain; needed only for a conversation poppy-mcp does not hold"`
}

// readEventsArgs are read_events' arguments.
type readEventsArgs struct {
	conversationArgs
	WaitSeconds *integer `json:"wait_seconds,omitempty" schema:"minimum=0,maximum=60" jsonschema:"How long to wait for the Company (default 10)"`
}

// startDirectArgs are start_direct_conversation's arguments.
type startDirectArgs struct {
	ConversationID string   `json:"conversation_id" jsonschema:"The agent conversation it follows from (the parent)"`
	Text           string   `json:"text" jsonschema:"The user's own first message, as they wrote it"`
	WaitSeconds    *integer `json:"wait_seconds,omitempty" schema:"minimum=0,maximum=60" jsonschema:"How long to wait for the Company (default 20)"`
	Domain         string   `json:"domain,omitempty" jsonschema:"The Company's domain; needed only for a conversation poppy-mcp does not hold"`
}

// listConversationsArgs are list_conversations' arguments.
type listConversationsArgs struct {
	Domain        string `json:"domain,omitempty" jsonschema:"Only this Company's conversations"`
	IncludeClosed bool   `json:"include_closed,omitempty" jsonschema:"Also list closed conversations"`
}

func (c *conversations) sendMessageTool() tool {
	return newTool("send_message",
		"Send a message to a Company's agent: starts a conversation, or continues one with conversation_id. "+
			"Give text, data or context (at least one). Waits for the reply and returns the new events. "+
			"Then reply with send_message, or read_events to wait longer.",
		annotations{title: "Send a message to a Company", openWorld: true},
		c.sendMessage)
}

func (c *conversations) readEventsTool() tool {
	return newTool("read_events",
		"Read what is new in a conversation: Company messages, state changes, sign-in requests and requests for the user. "+
			"Waits up to wait_seconds for news. Each event is returned once.",
		annotations{title: "Read a conversation's new events", readOnly: true, openWorld: true},
		c.readEvents)
}

func (c *conversations) requestHumanTool() tool {
	return newTool("request_human",
		"Ask for a person at the Company to take over a conversation. The status becomes queued while the Company finds someone; "+
			"call read_events to see when a person joins or why no one could.",
		annotations{title: "Ask for a person at the Company", idempotent: true, openWorld: true},
		c.requestHuman)
}

func (c *conversations) startDirectTool() tool {
	return newTool("start_direct_conversation",
		"Let the user talk with the Company themselves, linked to an agent conversation (e.g. after the Company asked for the user). "+
			"text is the user's own first message. Show the user the replies; send their words with send_message and from_user true.",
		annotations{title: "Start a Direct Conversation for the user", openWorld: true},
		c.startDirect)
}

func (c *conversations) closeTool() tool {
	return newTool("close_conversation",
		"Close a conversation you are done with; it then takes no more messages (a new one can be started). "+
			"Closing does not cancel what it started, such as an order or a return.",
		annotations{title: "Close a conversation", destructive: true, idempotent: true, openWorld: true},
		c.close)
}

func (c *conversations) listTool() tool {
	return newTool("list_conversations",
		"List the open conversations poppy-mcp holds, with each one's Company, status and responder, "+
			"to continue one with send_message or read_events.",
		annotations{title: "List conversations", readOnly: true, idempotent: true},
		c.list)
}

// message is the message send_message sends. Its error is phrased for the
// model.
func (a *sendMessageArgs) message() (conversation.Message, error) {
	m := conversation.Message{Sender: conversation.SenderAgent, Text: a.Text}
	if a.FromUser {
		// Poppy 0.1 §7.8: "human only when it carries the User's own words"
		m.Sender = conversation.SenderHuman
	}
	if len(a.Data) > 0 && string(a.Data) != "null" {
		m.Data = a.Data
	}
	m.Context = a.Context.conversation()
	if m.Text == "" && m.Data == nil && m.Context == nil {
		return m, errors.New("give at least one of text, data or context")
	}
	return m, nil
}

// messageContext is send_message's context argument (Poppy 0.1 §7.4): the
// facts the schema names, and any other the Company may take, as given.
type messageContext struct {
	Locale        string `json:"locale,omitempty" jsonschema:"Language tag, e.g. en-US"`
	TimeZone      string `json:"time_zone,omitempty" jsonschema:"IANA time zone, e.g. America/Los_Angeles"`
	UserAvailable *bool  `json:"user_available,omitempty" jsonschema:"Whether the user can answer questions now"`
	// other holds the facts the schema does not name, by name.
	other rawFields
}

// rawFields are JSON object members by name, as given
// (conversation.Context.Other).
type rawFields = map[string]json.RawMessage

func (c *messageContext) UnmarshalJSON(b []byte) error {
	type named messageContext // without this method
	var n named
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return &argumentError{"context must be an object"}
	}
	if err := json.Unmarshal(b, &n); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &argumentError{fmt.Sprintf("context field %s must be %s, not %s", te.Field, jsonType(te.Type), te.Value)}
		}
		return err
	}
	*c = messageContext(n)
	for _, name := range []string{"locale", "time_zone", "user_available"} {
		delete(all, name)
	}
	c.other = all
	return nil
}

// conversation is the context as conversation sends it, or nil when it
// says nothing.
func (c *messageContext) conversation() *conversation.Context {
	if c == nil || c.Locale == "" && c.TimeZone == "" && c.UserAvailable == nil && len(c.other) == 0 {
		return nil
	}
	other := c.other
	if other == nil {
		other = map[string]json.RawMessage{}
	}
	return &conversation.Context{Locale: c.Locale, TimeZone: c.TimeZone, UserAvailable: c.UserAvailable, Other: other}
}

// convTarget is a Company's conversations as one tool call reaches them.
type convTarget struct {
	c       *conversations
	cs      *agent.Company
	sess    *auth.Session
	tracker *conversation.Tracker
	domain  string // the Company's domain as discovered
}

// target returns the conversations of the Company at domain, starting its
// Session when needed. Its failure result is phrased for the model.
func (c *conversations) target(ctx context.Context, domain string) (*convTarget, *mcp.CallToolResult) {
	r, err := c.sessions.session(ctx, domain, false)
	if err != nil {
		return nil, c.sessions.failure(ctx, domain, err)
	}
	co := r.co
	tr, err := trackerAt(r)
	if errors.Is(err, conversation.ErrNoProtocol) {
		return nil, failure(map[string]string{"error": "no_company_agent", "domain": co.Domain,
			"next": "Use the Company's APIs or website instead."},
			"%s offers no Company Agent to talk with (no poppy entry in agent.protocols). Use its APIs or website instead.", co.Domain)
	}
	if err != nil {
		return nil, failure(map[string]string{"error": "conversation_failed", "domain": co.Domain}, "%v.", err)
	}
	return &convTarget{c: c, cs: r.cs, sess: r.sess, tracker: tr, domain: co.Domain}, nil
}

// trackerAt returns the person's conversation Tracker at the Company r
// reaches, sending through r's Session to the endpoint of r's domain; an
// error matching conversation.ErrNoProtocol when the Company has no
// Company Agent.
func trackerAt(r *reach) (*conversation.Tracker, error) {
	var protocols []discovery.Protocol
	if r.co.Document.Agent != nil {
		protocols = r.co.Document.Agent.Protocols
	}
	endpoint, err := conversation.ChooseEndpoint(protocols)
	if err != nil {
		return nil, err
	}
	cl, err := conversation.New(r.sess.Client(), endpoint, nil)
	if err != nil {
		return nil, err
	}
	return r.cs.Tracker(cl, conversation.Owner{Issuer: r.cs.Issuer(), UserID: r.sess.UserID(), Domain: r.co.Domain})
}

// held lists the conversations the store holds for the person of ctx, of
// the Company at domain or of all. Its failure result is phrased for the model.
func (c *conversations) held(ctx context.Context, domain string) ([]store.Conversation, *mcp.CallToolResult) {
	if c.store == nil {
		return nil, c.sessions.failure(ctx, domain, errNoIdentity)
	}
	host := ""
	if domain != "" {
		var err error
		if host, err = discovery.NormalizeDomain(domain); err != nil {
			return nil, failure(map[string]string{"error": "invalid_domain"}, "%v. Give the domain alone, like example.com.", err)
		}
	}
	all, err := c.sessions.people.of(ctx).Store().Conversations(ctx, host)
	if err != nil {
		return nil, failure(map[string]string{"error": "store_failed"}, "poppy-mcp could not read its conversations: %v.", err)
	}
	return all, nil
}

// byID finds a conversation in the store and returns its Company's
// conversations. domain (optional) picks among Companies using the same ID,
// and lets the Company be asked about a conversation the store does not
// hold.
func (c *conversations) byID(ctx context.Context, id, domain string) (*convTarget, *mcp.CallToolResult) {
	if !conversation.ValidID(id) {
		return nil, failure(map[string]string{"error": "invalid_conversation_id"},
			"%q is not a conversation ID. Call list_conversations to see the conversations poppy-mcp holds.", id)
	}
	all, fail := c.held(ctx, domain)
	if fail != nil {
		return nil, fail
	}
	var found []store.Conversation
	for _, held := range all {
		if held.ID == id {
			found = append(found, held)
		}
	}
	switch {
	case len(found) == 1:
		return c.target(ctx, found[0].Domain)
	case len(found) > 1:
		return nil, failure(map[string]string{"error": "ambiguous_conversation"},
			"Several Companies have a conversation %s: call again with domain.", id)
	case domain != "" && mcpauth.KeyFrom(ctx) == "":
		return c.target(ctx, domain) // the Company decides whether it is the user's (§7.2)
	}
	// A person of a hosted poppy-mcp has every conversation of theirs in
	// their store (shared by every replica): one they do not hold is not
	// theirs, and is not asked about under their Session.
	return nil, failure(map[string]string{"error": "unknown_conversation"},
		"poppy-mcp holds no conversation %s. Call list_conversations, or pass domain if it was started elsewhere.", id)
}
