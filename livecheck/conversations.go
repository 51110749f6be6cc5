package livecheck

// This file probes conversations (Poppy 0.1 §7), only with
// Options.Conversations: it starts one conversation with a message that
// says it is a test, resends messages by their IDs, reads the events, reads
// a conversation that does not exist, and closes its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// testText is the text of the messages conversations are probed with.
const testText = "A test message from poppy-mcp check --live, sent by the people who build this Company's Poppy side. It needs no answer."

// idPattern is the syntax of conversation, message and event IDs (Poppy
// 0.1 §7.2: "strings of 1 to 256 characters from the URL-safe base64 alphabet").
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// convState is the conversation a run started.
type convState struct {
	id    string    // its conversation_id
	first []byte    // the body that started it, to resend
	read  *exchange // the read of events conv.resend made
}

// postConv posts a JSON body to the conversation endpoint plus path, with
// the main Session's token.
func (r *run) postConv(ctx context.Context, path string, body []byte) (*exchange, error) {
	return r.call(ctx, call{url: r.ep.conversations + path, method: http.MethodPost, scheme: "DPoP",
		token: r.main.token, key: r.main.key, body: body})
}

// messageBody is {"message": {...}} for a message with id.
func messageBody(id string) []byte {
	return []byte(`{"message":{"id":` + jsonString(id) + `,"sender":"agent","text":` + jsonString(testText) + `}}`)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// started reads the answer to a message POST (§7.3): its conversation_id,
// status and responder.
func started(x *exchange) (string, error) {
	var v struct {
		ConversationID string `json:"conversation_id"`
		Status         string `json:"status"`
		Responder      string `json:"responder"`
	}
	if json.Unmarshal(x.body, &v) != nil {
		return "", fmt.Errorf("%s with no JSON object", statusLine(x))
	}
	switch {
	case !idPattern.MatchString(v.ConversationID):
		return "", fmt.Errorf("%s without a valid conversation_id", statusLine(x))
	case v.Status == "" || v.Responder == "":
		// Poppy 0.1 §7.7: "Every successful response to a POST or a read MUST include status and responder."
		return v.ConversationID, fmt.Errorf("%s without status and responder (§7.7)", statusLine(x))
	}
	return v.ConversationID, nil
}

// checkConvStart starts the test conversation.
func (r *run) checkConvStart(ctx context.Context) outcome {
	r.conv.first = messageBody("msg_check_" + randomID())
	x, err := r.postConv(ctx, "", r.conv.first)
	if err != nil {
		return unavailable("the first message", err)
	}
	if x.status/100 != 2 {
		return fail("refused the first message of a conversation: %s", statusLine(x))
	}
	id, err := started(x)
	r.conv.id = id
	switch {
	case err != nil:
		return fail("the first message was accepted, but the answer is wrong: %v", err)
	case x.status != http.StatusCreated:
		// Poppy 0.1 §7.3: "HTTP/1.1 201 Created"
		return fail("the first message was accepted with HTTP %d; a new conversation is 201 Created", x.status)
	}
	return pass("a message with an ID starts a conversation: HTTP 201 with conversation_id, status and responder")
}

// checkConvResendFirst sends the first message again. Poppy 0.1 §7.3: "the
// Company can recognize a retried first message and return the
// conversation it already started".
func (r *run) checkConvResendFirst(ctx context.Context) outcome {
	if r.conv.id == "" {
		return skip("no conversation was started")
	}
	x, err := r.postConv(ctx, "", r.conv.first)
	if err != nil {
		return unavailable("the resent first message", err)
	}
	id, err := started(x)
	switch {
	case x.status/100 != 2:
		return fail("refused the first message sent again with the same ID and content: %s; it must return the conversation it started", statusLine(x))
	case id != r.conv.id:
		return fail("the first message sent again with the same ID started another conversation; it must return the one it started")
	case err != nil:
		return fail("the first message sent again returned the conversation, but the answer is wrong: %v", err)
	}
	return pass("the first message sent again with the same ID returns the conversation it started")
}

// checkConvResend sends one message twice and reads the events. Poppy 0.1
// §7.3: "it returns the original response and doesn't add the message again".
func (r *run) checkConvResend(ctx context.Context) outcome {
	if r.conv.id == "" {
		return skip("no conversation was started")
	}
	msgID := "msg_check_" + randomID()
	path := "/" + r.conv.id + "/messages"
	for i := range 2 {
		x, err := r.postConv(ctx, path, messageBody(msgID))
		if err != nil {
			return unavailable("the message", err)
		}
		if x.status/100 != 2 {
			return fail("refused a message (sent %d of 2 times with one ID): %s", i+1, statusLine(x))
		}
	}
	x, err := r.call(ctx, call{url: r.ep.conversations + "/" + r.conv.id + "/events", scheme: "DPoP", token: r.main.token, key: r.main.key})
	if err != nil {
		return unavailable("the read of events", err)
	}
	r.conv.read = x
	rd, err := parseRead(x.body)
	if x.status != http.StatusOK || err != nil {
		return fail("the read of events after the message failed: %s", statusLine(x))
	}
	switch n := rd.count(msgID); n {
	case 1:
		return pass("a message sent twice with one ID is in the conversation once")
	case 0:
		return fail("a message the Company accepted is not in the first page of events")
	default:
		return fail("a message sent twice with one ID is in the conversation %d times: a retry must not add it again", n)
	}
}

// readReply is a read of events (Poppy 0.1 §7.5) as the probes judge it.
type readReply struct {
	fields map[string]json.RawMessage
	events []struct {
		Type    string `json:"type"`
		Message *struct {
			ID string `json:"id"`
		} `json:"message"`
	}
}

// parseRead reads a read of events. Events it cannot read are skipped.
func parseRead(body []byte) (readReply, error) {
	var rd readReply
	if err := json.Unmarshal(body, &rd.fields); err != nil {
		return rd, err
	}
	var evs []json.RawMessage
	_ = json.Unmarshal(rd.fields["events"], &evs)
	for _, raw := range evs {
		var ev struct {
			Type    string `json:"type"`
			Message *struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		if json.Unmarshal(raw, &ev) == nil {
			rd.events = append(rd.events, ev)
		}
	}
	return rd, nil
}

// count is how many message events carry the message ID.
func (rd readReply) count(msgID string) int {
	n := 0
	for _, ev := range rd.events {
		if ev.Type == "message" && ev.Message != nil && ev.Message.ID == msgID {
			n++
		}
	}
	return n
}

// missing lists the fields Poppy 0.1 §7.5 requires of every read that rd
// lacks or has with the wrong type: "Every successful read MUST include
// cursor, has_more, status, and responder, even with no events."
func (rd readReply) missing() []string {
	var out []string
	for _, f := range []struct {
		name string
		into any
	}{{"cursor", new(string)}, {"has_more", new(bool)}, {"status", new(string)}, {"responder", new(string)}, {"events", new([]json.RawMessage)}} {
		raw, ok := rd.fields[f.name]
		if !ok || json.Unmarshal(raw, f.into) != nil || string(raw) == "null" {
			out = append(out, f.name)
		}
	}
	return out
}

// checkConvRead judges the read conv.resend made.
func (r *run) checkConvRead(context.Context) outcome {
	x := r.conv.read
	if x == nil {
		return skip("no read of events was made")
	}
	rd, err := parseRead(x.body)
	if x.status != http.StatusOK || err != nil {
		return fail("the read of events failed: %s", statusLine(x))
	}
	if m := rd.missing(); len(m) > 0 {
		return fail("a read of events lacks %s (§7.5: every successful read includes cursor, has_more, status and responder)", strings.Join(m, ", "))
	}
	return pass("a read of events has cursor, has_more, status, responder and events")
}

// checkConvUnknown reads a conversation that does not exist. Poppy 0.1
// §7.13: conversation_not_found.
func (r *run) checkConvUnknown(ctx context.Context) outcome {
	x, err := r.call(ctx, call{url: r.unknown, scheme: "DPoP", token: r.main.token, key: r.main.key})
	if err != nil {
		return unavailable("the read of an unknown conversation", err)
	}
	if _, code := errorCode(x); x.status == http.StatusNotFound && code == "conversation_not_found" {
		return pass("a read of an unknown conversation gets HTTP 404, conversation_not_found")
	}
	return fail("a read of an unknown conversation got %s; §7.13 names conversation_not_found (HTTP 404)", statusLine(x))
}

// checkConvClose closes the test conversation. Poppy 0.1 §7.12: the
// Company "returns HTTP 200 with status and responder".
func (r *run) checkConvClose(ctx context.Context) outcome {
	if r.conv.id == "" {
		return skip("no conversation was started")
	}
	x, err := r.postConv(ctx, "/"+r.conv.id+"/close", []byte("{}"))
	if err != nil {
		return unavailable("closing the conversation", err)
	}
	var v struct {
		Status string `json:"status"`
	}
	if x.status != http.StatusOK {
		return fail("closing the test conversation got %s; §7.12 answers HTTP 200", statusLine(x))
	}
	if json.Unmarshal(x.body, &v) != nil || v.Status != "closed" {
		return fail("closing the test conversation got HTTP 200, but not status closed")
	}
	return pass("closing the test conversation gets HTTP 200, status closed")
}
