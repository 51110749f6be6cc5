package poppytest

// This file reads what the Personal Agent sends to conversations: message
// requests (Poppy 0.1 §7.3, §7.4, §7.8, §7.10) and the empty objects of
// handoff and close (§7.9, §7.12), and writes the conversation error
// answers (§7.13). A request that breaks a MUST of the spec is answered as
// a real Company would and reported as the agent's violation.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
)

// maxConvRequest bounds a conversation request body.
const maxConvRequest = 1 << 20

// convError is a conversation error answer (Poppy 0.1 §7.13), or the
// sign_in_required token error of §7.11.
type convError struct {
	code           string
	desc           string
	status         int
	conversationID string // direct_conversation_open: the open Direct Conversation
	violation      string // "section: what the agent did wrong"; "" when the agent did nothing wrong
}

// convErrorStatus gives each code its HTTP status (docs/spec-readings.md "Error codes", Poppy 0.1 §7.13).
var convErrorStatus = map[string]int{
	"invalid_request":          http.StatusBadRequest,
	"conversation_not_found":   http.StatusNotFound,
	"conversation_closed":      http.StatusConflict,
	"direct_conversation_open": http.StatusConflict,
	"message_id_conflict":      http.StatusConflict,
	"cursor_expired":           http.StatusGone,
	"sign_in_required":         http.StatusUnauthorized,
}

func newConvError(code, format string, args ...any) *convError {
	return &convError{code: code, desc: fmt.Sprintf(format, args...), status: convErrorStatus[code]}
}

// convBug is the answer to a request that shows an agent bug: a real
// Company's error, and a violation of section.
func convBug(section, code, format string, args ...any) *convError {
	e := newConvError(code, format, args...)
	e.violation = section + "\x00" + e.desc
	return e
}

// writeConvError reports e's violation, if any, and writes it: as a JSON
// error body (§7.13), or for sign_in_required as a challenge (§7.11, §6).
func (s *convState) writeConvError(w http.ResponseWriter, r *http.Request, e *convError) {
	if section, desc, ok := strings.Cut(e.violation, "\x00"); ok {
		s.violate(r, section, e.code, "%s", desc)
	}
	if e.code == "sign_in_required" {
		// Poppy 0.1 §7.11: sign_in_required has "the same meaning as the errors in section 6"
		s.writeResourceError(w, false, newError(e.code, "%s", e.desc), "")
		return
	}
	s.countServed(e.code)
	body := map[string]string{"error": e.code, "error_description": e.desc}
	if e.conversationID != "" {
		body["conversation_id"] = e.conversationID
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, body)
}

// idPattern is the syntax of conversation, message and event IDs (Poppy 0.1
// §7.2: "strings of 1 to 256 characters from the URL-safe base64 alphabet").
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// Formats of the context fields the spec defines (Poppy 0.1 §7.4).
var (
	localePattern   = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)          // RFC 5646, loosely
	timeZonePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`) // IANA names such as America/Los_Angeles
)

// messageRequest is a parsed message request.
type messageRequest struct {
	hasParent bool
	parentID  string
	msg       Message // without Role and Time
	canonical string  // the message as canonical JSON, to tell a retry from a conflict (§7.3)
}

// readMessageRequest reads and parses the body of a message POST. start
// says it is the first message of a conversation.
func (s *convState) readMessageRequest(r *http.Request, start bool) (*messageRequest, *convError) {
	body, e := readConvBody(r)
	if e != nil {
		return nil, e
	}
	return parseMessageRequest(body, start)
}

// readConvBody reads a JSON request body (Poppy 0.1 §7.2: "conversations
// use JSON over HTTPS").
func readConvBody(r *http.Request) ([]byte, *convError) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, convBug("7.2", "invalid_request", "Content-Type %q, want application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxConvRequest+1))
	if err != nil || len(body) > maxConvRequest {
		return nil, newConvError("invalid_request", "body unreadable or larger than %d bytes", maxConvRequest)
	}
	return body, nil
}

// parseMessageRequest parses {"parent_conversation_id": ..., "message": {...}}.
func parseMessageRequest(body []byte, start bool) (*messageRequest, *convError) {
	var req struct {
		Parent  *string         `json:"parent_conversation_id"`
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, convBug("7.2", "invalid_request", "body is not a JSON object: %v", err)
	}
	in := &messageRequest{}
	if req.Parent != nil {
		if !start {
			return nil, convBug("7.10", "invalid_request", "parent_conversation_id on a later message; it starts a Direct Conversation")
		}
		in.hasParent, in.parentID = true, *req.Parent
		if !idPattern.MatchString(in.parentID) {
			return nil, newConvError("conversation_not_found", "no conversation %q", in.parentID)
		}
	}
	m, canonical, e := parseMessage(req.Message)
	if e != nil {
		return nil, e
	}
	in.msg, in.canonical = m, canonical
	return in, nil
}

// wireMessageIn is a message as the Personal Agent sends it.
type wireMessageIn struct {
	ID      *string         `json:"id"`
	Sender  *string         `json:"sender"`
	Text    *string         `json:"text"`
	Data    json.RawMessage `json:"data"`
	Context json.RawMessage `json:"context"`
}

// parseMessage checks one message of the Personal Agent and returns it with
// its canonical JSON.
func parseMessage(raw json.RawMessage) (Message, string, *convError) {
	var in wireMessageIn
	var generic any
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &in) != nil || unmarshalNumbers(raw, &generic) != nil {
		return Message{}, "", convBug("7.3", "invalid_request", "message is missing or not a JSON object with string id, sender and text")
	}
	switch {
	case in.ID == nil || !idPattern.MatchString(*in.ID):
		// Poppy 0.1 §7.2: message IDs "are strings of 1 to 256 characters from the URL-safe base64 alphabet"
		return Message{}, "", convBug("7.2", "invalid_request", "message id %s is not 1 to 256 URL-safe base64 characters", quoteOrMissing(in.ID))
	case in.Sender == nil || (*in.Sender != "agent" && *in.Sender != "human"):
		// Poppy 0.1 §7.8: "the Personal Agent MUST set each message's sender: agent ... and human"
		return Message{}, "", convBug("7.8", "invalid_request", "message sender %s, want agent or human", quoteOrMissing(in.Sender))
	}
	m := Message{ID: *in.ID, Sender: *in.Sender}
	if in.Text != nil {
		m.Text = *in.Text
	}
	if len(in.Data) > 0 && string(in.Data) != "null" {
		m.Data = append(json.RawMessage(nil), in.Data...)
	}
	if len(in.Context) > 0 && string(in.Context) != "null" {
		ctx, e := parseContext(in.Context)
		if e != nil {
			return Message{}, "", e
		}
		m.Context = ctx
	}
	if m.Text == "" && m.Data == nil && m.Context == nil {
		// Poppy 0.1 §7.4: "A message MUST have at least one of text, data, or context."
		return Message{}, "", convBug("7.4", "invalid_request", "message %s has none of text, data and context", m.ID)
	}
	canonical, _ := json.Marshal(generic) // maps marshal with sorted keys
	return m, string(canonical), nil
}

// parseContext checks the context fields the spec defines (Poppy 0.1 §7.4:
// "When a Personal Agent shares one of these facts, it MUST use the field
// and format defined here").
func parseContext(raw json.RawMessage) (map[string]any, *convError) {
	var ctx map[string]any
	if err := unmarshalNumbers(raw, &ctx); err != nil || ctx == nil {
		return nil, convBug("7.4", "invalid_request", "context is not a JSON object")
	}
	if v, ok := ctx["locale"]; ok {
		if s, isStr := v.(string); !isStr || !localePattern.MatchString(s) {
			return nil, convBug("7.4", "invalid_request", "context locale %v is not a language tag such as en-US", v)
		}
	}
	if v, ok := ctx["time_zone"]; ok {
		if s, isStr := v.(string); !isStr || !timeZonePattern.MatchString(s) {
			return nil, convBug("7.4", "invalid_request", "context time_zone %v is not an IANA time zone name", v)
		}
	}
	if v, ok := ctx["user_available"]; ok {
		if _, isBool := v.(bool); !isBool {
			return nil, convBug("7.4", "invalid_request", "context user_available %v is not true or false", v)
		}
	}
	return ctx, nil
}

// unmarshalNumbers decodes JSON keeping numbers as written.
func unmarshalNumbers(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("poppytest: data after the JSON value")
	}
	return nil
}

func quoteOrMissing(p *string) string {
	if p == nil {
		return "missing"
	}
	return fmt.Sprintf("%q", *p)
}

// readEmptyObject reads the body of a handoff or close request (Poppy 0.1
// §7.9: "with an empty JSON object"; §7.12: "sending an empty JSON object").
func (s *convState) readEmptyObject(r *http.Request, section string) *convError {
	body, e := readConvBody(r)
	if e != nil {
		return e
	}
	var v map[string]json.RawMessage
	switch err := json.Unmarshal(body, &v); {
	case err != nil || v == nil:
		return convBug(section, "invalid_request", "body %.40q is not a JSON object", body)
	case len(v) > 0:
		// The spec defines no field for these requests: an agent that sends
		// one expects something the Company will not do.
		return convBug(section, "invalid_request", "body %.40q is not the empty JSON object {}", body)
	}
	return nil
}
