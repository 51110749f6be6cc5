// This file implements the package's protocol errors: the conversation
// errors of Poppy 0.1 §7.13, a JSON body with an error code like an OAuth
// error response, and the answers that are not a protocol error at all.

package conversation

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Error is a conversation error from the Company (Poppy 0.1 §7.13). Compare
// codes with errors.Is(err, conversation.ErrCursorExpired) and friends: Is
// matches any *Error with the same Code.
//
// Token errors (sign_in_required, insufficient_scope, ...) are not Errors:
// they come from the Session's client as *auth.Error.
type Error struct {
	// Code is the error code, such as "conversation_closed". It is empty
	// for an answer that carries none (an HTML 404 page, say).
	Code string
	// Description is error_description as the Company sent it, cleaned of
	// control characters and cut to 300 bytes. Company text: untrusted.
	Description string
	// Status is the HTTP status of the response.
	Status int
	// Header is the response's header.
	Header http.Header
	// ConversationID is the open Direct Conversation, for
	// direct_conversation_open (Poppy 0.1 §7.10).
	ConversationID string
	// Extension names the required extension, for extension_required
	// (Poppy 0.1 §3.3).
	Extension string
}

// Codes of Poppy 0.1 §7.13 (docs/spec-readings.md "Error codes"). Use them with
// errors.Is.
var (
	ErrInvalidRequest         = &Error{Code: "invalid_request"}
	ErrConversationNotFound   = &Error{Code: "conversation_not_found"}
	ErrConversationClosed     = &Error{Code: "conversation_closed"}
	ErrDirectConversationOpen = &Error{Code: "direct_conversation_open"}
	ErrMessageIDConflict      = &Error{Code: "message_id_conflict"}
	ErrCursorExpired          = &Error{Code: "cursor_expired"}
	ErrExtensionRequired      = &Error{Code: "extension_required"}
)

// Error returns "conversation: CODE: description (HTTP n)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("conversation: ")
	if e.Code != "" {
		b.WriteString(e.Code)
	} else {
		b.WriteString("unexpected answer")
	}
	switch {
	case e.Code == "direct_conversation_open" && e.ConversationID != "":
		fmt.Fprintf(&b, ": Direct Conversation %s is open", e.ConversationID)
	case e.Code == "extension_required" && e.Extension != "":
		fmt.Fprintf(&b, ": the Company requires extension %s", untrusted.Quote(e.Extension, 300))
	}
	if e.Description != "" {
		b.WriteString(": ")
		b.WriteString(untrusted.Quote(e.Description, 300)) // the Company's words, marked
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	return b.String()
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// errorWire is the JSON body of a conversation error (Poppy 0.1 §7.13).
type errorWire struct {
	Error          string `json:"error"`
	Description    string `json:"error_description"`
	ConversationID string `json:"conversation_id"`
	Extension      string `json:"extension"`
}

// parseError builds the *Error of a non-success answer. A body that is not
// a JSON error gives an *Error without a Code.
func parseError(status int, h http.Header, body []byte) *Error {
	e := &Error{Status: status, Header: h}
	var w errorWire
	if httpbody.IsJSON(h.Get("Content-Type")) && json.Unmarshal(body, &w) == nil && untrusted.Code(w.Error) {
		e.Code, e.Description, e.Extension = w.Error, untrusted.Text(w.Description, 300), untrusted.Text(w.Extension, 300)
		if validID(w.ConversationID) {
			e.ConversationID = w.ConversationID
		}
	}
	return e
}

// ProtocolError reports an answer that breaks Poppy 0.1: a success without
// the fields it must have, an ID of the wrong syntax, a body that is not
// JSON. Retrying does not help.
type ProtocolError struct {
	// Section is the section of Poppy 0.1 broken, such as "7.5".
	Section string
	// Problem says what was wrong.
	Problem string
}

// Error returns "conversation: the Company broke Poppy 0.1 §S: problem".
func (e *ProtocolError) Error() string {
	return fmt.Sprintf("conversation: the Company broke Poppy 0.1 §%s: %s", e.Section, e.Problem)
}

func protocolErr(section, format string, args ...any) error {
	return &ProtocolError{Section: section, Problem: fmt.Sprintf(format, args...)}
}

// isProtocolError reports whether err is a *ProtocolError.
func isProtocolError(err error) bool {
	var pe *ProtocolError
	return errors.As(err, &pe)
}
