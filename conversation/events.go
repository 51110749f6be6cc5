// This file is the one table of event types (Poppy 0.1 §7.5; docs/spec-
// readings.md "Conversations"): for each type, how it is read from the
// wire (the fields it needs) and how the Tracker keeps it (what it changes
// in the store, and whether the caller hears of it). The event, its wire
// form and the table are here together, so an event type is added in this
// file, its test and the docs; the MCP layer shows an event of a type it
// has no row for generically (tools/conversation_result.go).

package conversation

import (
	"context"
	"encoding/json"
	"time"
)

// Event types (Poppy 0.1 §7.5; docs/spec-readings.md "Conversations").
const (
	EventMessage       = "message"
	EventState         = "state"
	EventAuthorization = "authorization"
	EventUserRequested = "user_requested"
	EventDirectOpened  = "direct_opened"
	EventDirectClosed  = "direct_closed"
)

// Event is one event of a conversation (Poppy 0.1 §7.5). Type says which
// of the other fields are set; events of other types carry only ID, Type
// and CreatedAt, and are to be skipped.
type Event struct {
	// ID is the event's ID, chosen by the Company; it is also a cursor.
	ID string
	// Type is one of the Event constants, or a type this package does not
	// know.
	Type string
	// CreatedAt is when the event happened; zero when the Company sent no
	// valid RFC 3339 time.
	CreatedAt time.Time

	// Message is the message of a message event.
	Message *ReceivedMessage
	// Status and Responder are the state of a state event.
	Status, Responder string
	// Error is sign_in_required or insufficient_scope, and Scope the scopes
	// needed, in an authorization event (§7.11).
	Error, Scope string
	// Reason is why the Company asks for the User, in a user_requested
	// event (§7.10).
	Reason string
	// ConversationID is the Direct Conversation of a direct_opened or
	// direct_closed event (§7.10).
	ConversationID string
}

// eventWire is one event (§7.5; docs/spec-readings.md "Conversations").
type eventWire struct {
	ID             string               `json:"id"`
	Type           string               `json:"type"`
	CreatedAt      string               `json:"created_at"`
	Message        *receivedMessageWire `json:"message"`
	Status         string               `json:"status"`
	Responder      string               `json:"responder"`
	Error          string               `json:"error"`
	Scope          string               `json:"scope"`
	Reason         string               `json:"reason"`
	ConversationID string               `json:"conversation_id"`
}

type receivedMessageWire struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Sender  string          `json:"sender"`
	Text    string          `json:"text"`
	Data    json.RawMessage `json:"data"`
	Context json.RawMessage `json:"context"`
}

// eventType is how one event type is read and kept.
type eventType struct {
	// read copies the type's fields from w into ev, and reports whether
	// the ones it needs are there.
	read func(ev *Event, w *eventWire) bool
	// keep applies a new event to the Tracker's records and upd, and
	// reports whether to return it to the caller; nil: nothing to apply,
	// and it is returned.
	keep func(t *Tracker, ctx context.Context, ev *Event, upd *Update) (bool, error)
}

// eventTypes is the one table of event types, by type. It is built on
// each call: the package keeps no state.
func eventTypes() map[string]eventType {
	return map[string]eventType{
		EventMessage: {read: readMessage, keep: keepMessage},
		EventState: {read: func(ev *Event, w *eventWire) bool {
			ev.Status, ev.Responder = w.Status, w.Responder
			return w.Status != "" && w.Responder != ""
		}, keep: func(_ *Tracker, _ context.Context, ev *Event, upd *Update) (bool, error) {
			upd.State = State{Status: ev.Status, Responder: ev.Responder}
			return true, nil
		}},
		EventAuthorization: {read: func(ev *Event, w *eventWire) bool {
			ev.Error, ev.Scope = w.Error, w.Scope
			return w.Error != ""
		}},
		EventUserRequested: {read: func(ev *Event, w *eventWire) bool {
			ev.Reason = w.Reason
			return true
		}},
		EventDirectOpened: {read: readDirect},
		EventDirectClosed: {read: readDirect, keep: func(t *Tracker, ctx context.Context, ev *Event, _ *Update) (bool, error) {
			return true, t.markClosed(ctx, ev.ConversationID, "")
		}},
	}
}

// readMessage reads a message event: a message with at least one of text,
// data or context (§7.4).
func readMessage(ev *Event, w *eventWire) bool {
	m := w.Message
	if m == nil || m.Text == "" && isNull(m.Data) && isNull(m.Context) {
		return false
	}
	ev.Message = &ReceivedMessage{ID: m.ID, Role: m.Role, Sender: m.Sender, Text: m.Text}
	if !isNull(m.Data) {
		ev.Message.Data = m.Data
	}
	if !isNull(m.Context) {
		ev.Message.Context = m.Context
	}
	return true
}

// keepMessage returns a message unless this agent sent it. A message is
// the Personal Agent's own only if it sent that ID: the spec defines no
// role for them (§7.5 and §7.7 name only company), and a Company could
// write any role and sender. Poppy 0.1 §7.2: "the Personal Agent chooses
// message IDs for its own messages".
func keepMessage(t *Tracker, ctx context.Context, ev *Event, upd *Update) (bool, error) {
	own, err := t.sent(ctx, upd.ConversationID, ev.Message.ID)
	return !own, err
}

// readDirect reads a direct_opened or direct_closed event: the Direct
// Conversation's valid ID (§7.10).
func readDirect(ev *Event, w *eventWire) bool {
	ev.ConversationID = w.ConversationID
	return validID(w.ConversationID)
}

// Known reports whether the event's type is one of Poppy 0.1's. Poppy 0.1
// §7.5: "Personal Agents MUST skip event types they don't recognize".
func (e *Event) Known() bool {
	_, ok := eventTypes()[e.Type]
	return ok
}

// fillEvent copies the fields of ev's type from w, and reports whether the
// ones the type needs are there; a type of no row needs none.
func fillEvent(ev *Event, w *eventWire) bool {
	if et, ok := eventTypes()[ev.Type]; ok {
		return et.read(ev, w)
	}
	return true
}

// apply applies one new event and reports whether to return it: an event
// of a type of no row is skipped (Known).
func (t *Tracker) apply(ctx context.Context, ev *Event, upd *Update) (bool, error) {
	et, ok := eventTypes()[ev.Type]
	if !ok || et.keep == nil {
		return ok, nil
	}
	return et.keep(t, ctx, ev, upd)
}
