// This file holds the wire forms of Poppy 0.1 §7 and their parsers. What
// the Company sends is untrusted: every parser here is fuzzed.

package conversation

import (
	"bytes"
	"encoding/json"
	"mime"
	"time"
)

// messageWire is a message as the Personal Agent sends it (§7.3, §7.4).
type messageWire struct {
	ID      string          `json:"id"`
	Sender  string          `json:"sender"`
	Text    string          `json:"text,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Context *Context        `json:"context,omitempty"`
}

// message is the Message a wire form was made from.
func (w messageWire) message() Message {
	return Message{ID: w.ID, Sender: w.Sender, Text: w.Text, Data: w.Data, Context: w.Context}
}

func toWire(m Message) messageWire {
	w := messageWire{ID: m.ID, Sender: m.Sender, Text: m.Text, Data: m.Data}
	if !m.Context.Empty() {
		w.Context = m.Context
	}
	return w
}

// postWire is the body of a start (§7.3, §7.10) or of a later message.
type postWire struct {
	// Poppy 0.1 §7.10: "adding parent_conversation_id with the earlier conversation's ID"
	ParentConversationID string      `json:"parent_conversation_id,omitempty"`
	Message              messageWire `json:"message"`
}

// pageWire is a read's answer (§7.5), and a POST's (§7.3).
type pageWire struct {
	ConversationID string            `json:"conversation_id"`
	Events         []json.RawMessage `json:"events"`
	Cursor         *string           `json:"cursor"`
	HasMore        *bool             `json:"has_more"`
	Status         string            `json:"status"`
	Responder      string            `json:"responder"`
}

// textDeltaWire is the data of a text-delta SSE event (§7.6).
type textDeltaWire struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// maxIDLen is the longest ID. Poppy 0.1 §7.2: "Conversation IDs, message
// IDs, and event IDs are strings of 1 to 256 characters from the URL-safe
// base64 alphabet (RFC 4648, section 5)".
const maxIDLen = 256

// validID checks the syntax of a conversation, message or event ID.
func validID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ValidID reports whether s is a valid conversation, message or event ID
// (Poppy 0.1 §7.2), so callers can refuse a bad one before any request.
func ValidID(s string) bool { return validID(s) }

// parseEvent parses one event. An event without a valid ID is refused,
// for it can be neither a cursor nor skipped when seen again. A known type
// missing the fields it needs is kept as an event of no known type, so it
// is skipped like one.
func parseEvent(raw []byte) (Event, error) {
	var w eventWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return Event{}, protocolErr("7.5", "an event is not a JSON object")
	}
	if !validID(w.ID) {
		return Event{}, protocolErr("7.5", "an event has no valid id")
	}
	ev := Event{ID: w.ID, Type: w.Type}
	// Poppy 0.1 §7.5: "Every event has an id, a type, and a created_at time (RFC 3339)."
	if t, err := time.Parse(time.RFC3339, w.CreatedAt); err == nil {
		ev.CreatedAt = t
	}
	if !fillEvent(&ev, &w) {
		ev = Event{ID: ev.ID, Type: "malformed " + ev.Type, CreatedAt: ev.CreatedAt}
	}
	return ev, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// parsePage parses a read's answer, or a POST's. requestCursor is the
// cursor the request carried.
func parsePage(body []byte, requestCursor string) (*Page, error) {
	var w pageWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, protocolErr("7.5", "the answer is not a JSON object")
	}
	// Poppy 0.1 §7.7: "Every successful response to a POST or a read MUST
	// include status and responder."
	if w.Status == "" || w.Responder == "" {
		return nil, protocolErr("7.7", "the answer has no status or responder")
	}
	p := &Page{ConversationID: w.ConversationID, State: State{Status: w.Status, Responder: w.Responder}}
	if w.ConversationID != "" && !validID(w.ConversationID) {
		return nil, protocolErr("7.2", "conversation_id is not a valid ID")
	}
	p.Read = w.Events != nil || w.Cursor != nil || w.HasMore != nil
	for _, raw := range w.Events {
		ev, err := parseEvent(raw)
		if err != nil {
			p.Dropped++
			continue
		}
		p.Events = append(p.Events, ev)
	}
	p.HasMore = w.HasMore != nil && *w.HasMore
	// A cursor that is missing, "" or not an ID is taken from the events:
	// "" would read from the beginning again, forever with has_more.
	switch {
	case w.Cursor != nil && validID(*w.Cursor):
		p.Cursor = *w.Cursor
	case len(p.Events) > 0:
		// Poppy 0.1 §7.5: "cursor is the last event returned"
		p.Cursor = p.Events[len(p.Events)-1].ID
	default:
		// Poppy 0.1 §7.5: "or the request's cursor if there were none"
		p.Cursor = requestCursor
	}
	return p, nil
}

// parseTextDelta parses the data of a text-delta event.
func parseTextDelta(data string) (TextDelta, bool) {
	var w textDeltaWire
	if json.Unmarshal([]byte(data), &w) != nil || w.Text == "" {
		return TextDelta{}, false
	}
	return TextDelta{MessageID: w.MessageID, Text: w.Text}, true
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}
