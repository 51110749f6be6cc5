package conversation

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
)

// Statuses and responders (Poppy 0.1 §7.7).
const (
	StatusWorking  = "working" // the Company is preparing a reply
	StatusIdle     = "idle"    // waiting for the Personal Agent
	StatusQueued   = "queued"  // waiting for a person after a handoff
	StatusClosed   = "closed"  // no more messages
	ResponderAgent = "agent"   // the Company Agent
	ResponderHuman = "human"   // a person at the Company
)

// Senders and roles of messages (Poppy 0.1 §7.7, §7.8). The spec defines
// no role for the Personal Agent's own messages: they are known by the
// message IDs it sent, never by role.
const (
	SenderAgent = "agent"   // written by an AI: the Personal Agent, or the Company Agent
	SenderHuman = "human"   // the User's own words, or a person at the Company
	RoleCompany = "company" // a message of the Company (§7.7: "The role stays company")
)

// Message is a message of the Personal Agent (Poppy 0.1 §7.4). It must have
// at least one of Text, Data or Context.
type Message struct {
	// ID is the message ID, unique for the User (§7.3); NewMessageID makes
	// one. A retry sends the same ID with the same content.
	ID string
	// Sender is SenderAgent, or SenderHuman only when the message carries
	// the User's own words (§7.8).
	Sender string
	// Text is the message itself; no JSON or other markup in it (§7.4).
	Text string
	// Data holds structured details as a JSON value; nil when absent.
	Data json.RawMessage
	// Context holds facts about the User's situation; nil when absent.
	Context *Context
}

// Context is the context of a message (Poppy 0.1 §7.4): facts about the
// User's situation. Fields left out keep their previous values at the
// Company, so a zero field is simply not sent.
type Context struct {
	// Locale is a language tag such as en-US (RFC 5646).
	Locale string
	// TimeZone is an IANA time zone name such as America/Los_Angeles.
	TimeZone string
	// UserAvailable says whether the User can answer questions right now;
	// nil when not shared.
	UserAvailable *bool
	// Other holds further fields (accessibility needs, preferred units),
	// each a JSON value, sent as they are.
	Other map[string]json.RawMessage
}

// Empty reports whether c shares nothing.
func (c *Context) Empty() bool {
	return c == nil || c.Locale == "" && c.TimeZone == "" && c.UserAvailable == nil && len(c.Other) == 0
}

// MarshalJSON writes the context as one JSON object.
func (c Context) MarshalJSON() ([]byte, error) {
	m := make(map[string]json.RawMessage, len(c.Other)+3)
	maps.Copy(m, c.Other)
	put := func(k string, v any) {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	// Poppy 0.1 §7.4: "When a Personal Agent shares one of these facts, it
	// MUST use the field and format defined here"
	if c.Locale != "" {
		put("locale", c.Locale)
	}
	if c.TimeZone != "" {
		put("time_zone", c.TimeZone)
	}
	if c.UserAvailable != nil {
		put("user_available", *c.UserAvailable)
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads a context as MarshalJSON writes it, so that a
// message kept pending is sent again as it was.
func (c *Context) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*c = Context{}
	for k, v := range m {
		var err error
		switch k {
		case "locale":
			err = json.Unmarshal(v, &c.Locale)
		case "time_zone":
			err = json.Unmarshal(v, &c.TimeZone)
		case "user_available":
			err = json.Unmarshal(v, &c.UserAvailable)
		default:
			if c.Other == nil {
				c.Other = map[string]json.RawMessage{}
			}
			c.Other[k] = v
		}
		if err != nil {
			return fmt.Errorf("conversation: context field %s: %w", k, err)
		}
	}
	return nil
}

var (
	// RFC 5646 §2.1, loosely: a primary subtag of letters, then subtags of
	// letters and digits.
	localeSyntax = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)
	// IANA time zone names: Area/Location[/Sublocation], or UTC and kin.
	timeZoneSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,2}$`)
)

// check validates the context's defined fields and that Other neither
// repeats them nor holds anything but JSON values.
func (c *Context) check() error {
	if c.Locale != "" && !localeSyntax.MatchString(c.Locale) {
		return fmt.Errorf("conversation: context locale %q is not a language tag such as en-US (RFC 5646)", c.Locale)
	}
	if c.TimeZone != "" && !timeZoneSyntax.MatchString(c.TimeZone) {
		return fmt.Errorf("conversation: context time_zone %q is not an IANA time zone name such as America/Los_Angeles", c.TimeZone)
	}
	for k, v := range c.Other {
		switch k {
		case "locale", "time_zone", "user_available":
			return fmt.Errorf("conversation: context field %s belongs in its own Context field", k)
		}
		if !json.Valid(v) {
			return fmt.Errorf("conversation: context field %s is not a JSON value", k)
		}
	}
	return nil
}

// check validates a message before it is sent.
func (m *Message) check() error {
	if !validID(m.ID) {
		return errors.New("conversation: a message needs an ID of 1 to 256 letters, digits, - and _ (Poppy 0.1 §7.2)")
	}
	if m.Sender != SenderAgent && m.Sender != SenderHuman {
		return fmt.Errorf("conversation: sender %q is neither agent nor human (Poppy 0.1 §7.8)", m.Sender)
	}
	if m.Data != nil && !json.Valid(m.Data) {
		return errors.New("conversation: message data is not a JSON value")
	}
	if m.Context != nil {
		if err := m.Context.check(); err != nil {
			return err
		}
	}
	// Poppy 0.1 §7.4: "A message MUST have at least one of text, data, or context."
	if m.Text == "" && len(m.Data) == 0 && m.Context.Empty() {
		return errors.New("conversation: a message needs at least one of text, data or context (Poppy 0.1 §7.4)")
	}
	return nil
}

// ReceivedMessage is a message as an event carries it. The Tracker returns
// only messages this agent did not send: the Company's, whose Text and
// Data are third-party content whatever Role and Sender say.
type ReceivedMessage struct {
	ID      string
	Role    string // as the Company wrote it; RoleCompany for its own
	Sender  string // as the Company wrote it: SenderAgent or SenderHuman
	Text    string
	Data    json.RawMessage // nil when absent
	Context json.RawMessage // nil when absent; only the Personal Agent sends one
}

// State is who handles the Company side of a conversation and how it
// stands (Poppy 0.1 §7.7).
type State struct {
	Status    string // one of the Status constants, or a later version's
	Responder string // ResponderAgent or ResponderHuman
}

// Page is the answer to a read of events (Poppy 0.1 §7.5), or to a POST
// that asked for one (§7.3 "Replies in the response").
type Page struct {
	// ConversationID is the conversation; for a new conversation, its new ID.
	ConversationID string
	// Events are the events returned, in order, without the ones that
	// were malformed (Dropped counts them).
	Events []Event
	// Cursor is the last event returned, or the request's cursor if there
	// were none. Opaque: never compare or sort cursors (§7.5).
	Cursor string
	// HasMore says to read again right away.
	HasMore bool
	// Dropped is how many events were dropped as malformed (no valid ID).
	Dropped int
	// Read says whether the answer was a read; a POST without wait or
	// cursor answers only with the conversation ID and State.
	Read bool
	State
}

// TextDelta is a piece of the text of a Company message being written
// (Poppy 0.1 §7.6). It is for showing only: "It MUST NOT act on text from a
// text-delta event."
type TextDelta struct {
	MessageID string
	Text      string
}
