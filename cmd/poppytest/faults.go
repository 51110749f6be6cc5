package main

// This file is the table of faults: what a run's Company does to the agent
// now, while it runs (poppytest.Server's methods). Each is
// POST /admin/runs/{run}/faults/{name} with its parameters as a JSON
// object. Adding one is one entry here; the routes, the admin API's
// OpenAPI document and GET /admin/knobs follow from the table.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// param is one parameter of a fault.
type param struct {
	name     string
	typ      knobType
	required bool
	doc      string
}

// fault is one thing a run's Company can be made to do now.
type fault struct {
	name   string
	doc    string
	params []param
	do     func(s *poppytest.Server, a faultArgs) (any, error)
}

// Parameters shared by several faults.
var (
	pHost  = param{"host", typeString, true, "a host of the run's Company, such as auth.example.com"}
	pPath  = param{"path", typeString, true, "a path on it, such as /oauth/token"}
	pCount = param{"count", typeInt, true, "how many"}
	pConv  = param{"conversation_id", typeString, true, "a conversation of the run"}
)

// faults are every fault a run can be given.
var faults = []fault{
	{"rate_limit", "The next count requests to host and path get 429 with Retry-After; one sent before it passed is a §4.3 violation.",
		[]param{pHost, pPath, pCount, {"retry_after", typeDuration, true, "the Retry-After, rounded up to whole seconds"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			s.RateLimit(a.str("host"), a.str("path"), a.int("count"), a.dur("retry_after"))
			return nil, nil
		}},
	{"slow_body", "Every later answer at host and path sends its body one byte per interval; a zero interval stops it.",
		[]param{pHost, pPath, {"interval", typeDuration, true, "the time between two bytes"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			s.SlowBody(a.str("host"), a.str("path"), a.dur("interval"))
			return nil, nil
		}},
	{"rotate_nonce", "Replace the DPoP nonce of every host: proofs with the old one get use_dpop_nonce (RFC 9449 §8).", nil,
		func(s *poppytest.Server, _ faultArgs) (any, error) { s.RotateNonce(); return nil, nil }},
	{"expire_tokens", "Every Session Token issued so far stops working (invalid_token): the agent must renew.", nil,
		func(s *poppytest.Server, _ faultArgs) (any, error) { s.ExpireTokens(); return nil, nil }},
	{"end_session", "End a Session: its tokens stop working and renewing it gets invalid_session (§4.2).",
		[]param{{"session_id", typeString, true, "the Session, as GET .../sessions lists it"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			if !s.EndSession(a.str("session_id")) {
				return nil, notFound("no Session " + a.str("session_id"))
			}
			return nil, nil
		}},
	{"slow_down", "The next count device polls get slow_down (RFC 8628 §3.5).", []param{pCount},
		func(s *poppytest.Server, a faultArgs) (any, error) { s.SlowDown(a.int("count")); return nil, nil }},
	{"expire_device", "A device sign-in expires now: its next poll gets expired_token.",
		[]param{{"user_code", typeString, true, "the sign-in's user code"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			return nil, fromServer(s.ExpireDevice(a.str("user_code")))
		}},
	{"fail_next_post", "The next count message POSTs are accepted, then answered 503: the retry must be recognized (§7.3).", []param{pCount},
		func(s *poppytest.Server, a faultArgs) (any, error) { s.FailNextPost(a.int("count")); return nil, nil }},
	{"drop_connection_after_accept", "The next count message POSTs are accepted, then the connection breaks without an answer.", []param{pCount},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			s.DropConnectionAfterAccept(a.int("count"))
			return nil, nil
		}},
	{"expire_cursors", "Forget every event but the newest of each conversation: old cursors get cursor_expired (§7.5).", nil,
		func(s *poppytest.Server, _ faultArgs) (any, error) { s.ExpireCursors(); return nil, nil }},
	{"drop_stream_after", "The next event stream breaks after count events, in the middle of a message (§7.6).", []param{pCount},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			s.DropStreamAfter(a.int("count"))
			return nil, nil
		}},
	{"flood_deltas", "Hostile: the next event stream first sends count text-delta pieces of messages that never come (§7.6).", []param{pCount},
		func(s *poppytest.Server, a faultArgs) (any, error) { s.FloodDeltas(a.int("count")); return nil, nil }},
	{"request_user", "The Company asks for the User in a conversation (§7.10).",
		[]param{pConv, {"reason", typeString, false, "why"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			return nil, fromServer(s.RequestUser(a.str("conversation_id"), a.str("reason")))
		}},
	{"close_conversation", "The Company closes a conversation (§7.12).", []param{pConv},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			return nil, fromServer(s.CloseConversation(a.str("conversation_id")))
		}},
	{"add_event", "Add an event the script does not make, such as one of a type the spec does not define (§7.5: agents skip those).",
		[]param{pConv, {"type", typeString, true, "the event's type"}, {"text", typeString, false, "for a message event, its text"}},
		addEvent},
	{"restart_mcp", "Restart the MCP server: it forgets every MCP session, and open streams end.", nil,
		func(s *poppytest.Server, _ faultArgs) (any, error) { s.RestartMCP(); return nil, nil }},
	{"mcp_add_tool", "Add an MCP tool that echoes its text argument; clients get notifications/tools/list_changed.",
		[]param{{"name", typeString, true, "the tool's name"}, {"description", typeString, false, "its description"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			s.MCPAddTool(a.str("name"), a.str("description"))
			return nil, nil
		}},
	{"mcp_remove_tool", "Remove a tool mcp_add_tool added.", []param{{"name", typeString, true, "the tool's name"}},
		func(s *poppytest.Server, a faultArgs) (any, error) {
			if !s.MCPRemoveTool(a.str("name")) {
				return nil, notFound("no added tool " + a.str("name"))
			}
			return nil, nil
		}},
	{"set_document", "Serve a document of your own at host and path from now on: a changed poppy.json, a soft 404, a redirect to http.",
		[]param{pHost, pPath, {"status", typeInt, false, "its status; default 200"}, {"content_type", typeString, false, "its Content-Type; default application/json"},
			{"body", typeString, false, "its body"}, {"location", typeString, false, "a Location header"}},
		setDocument},
}

func addEvent(s *poppytest.Server, a faultArgs) (any, error) {
	ev := poppytest.Event{Type: a.str("type")}
	if ev.Type == "message" {
		ev.Message = &poppytest.Message{Sender: "agent", Text: a.str("text")}
	}
	out, err := s.AddEvent(a.str("conversation_id"), ev)
	if err != nil {
		return nil, fromServer(err)
	}
	return map[string]string{"event_id": out.ID}, nil
}

func setDocument(s *poppytest.Server, a faultArgs) (any, error) {
	host := strings.ToLower(a.str("host"))
	if !servesHost(s, host) {
		return nil, badRequest("host " + host + " is not one of the run's")
	}
	status := a.int("status")
	if status == 0 {
		status = http.StatusOK
	}
	if status < 100 || status > 599 {
		return nil, badRequest(fmt.Sprintf("status %d is not 100 to 599", status))
	}
	h := http.Header{"Content-Type": {orDefault(a.str("content_type"), "application/json")}}
	if l := a.str("location"); l != "" {
		h.Set("Location", l)
	}
	s.SetDocument(host, a.str("path"), status, h, []byte(a.str("body")))
	return nil, nil
}

// servesHost reports whether host is one of the Company's hosts.
func servesHost(s *poppytest.Server, host string) bool {
	for _, h := range s.Hosts() {
		if h == host {
			return true
		}
	}
	return false
}

// lookupFault returns the fault named name.
func lookupFault(name string) (fault, bool) {
	for _, f := range faults {
		if f.name == name {
			return f, true
		}
	}
	return fault{}, false
}

// faultArgs are a fault's parameters, checked against its table.
type faultArgs map[string]any

// parseFaultArgs checks body against the fault's parameters.
func parseFaultArgs(f fault, body map[string]json.RawMessage) (faultArgs, error) {
	out := faultArgs{}
	for name := range body {
		if !hasParam(f, name) {
			return nil, fmt.Errorf("%s takes no parameter %q", f.name, name)
		}
	}
	for _, p := range f.params {
		raw, ok := body[p.name]
		if !ok {
			if p.required {
				return nil, fmt.Errorf("%s needs %s (%s)", f.name, p.name, p.typ)
			}
			continue
		}
		v, err := parseParam(p, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[p.name] = v
	}
	return out, nil
}

func hasParam(f fault, name string) bool {
	for _, p := range f.params {
		if p.name == name {
			return true
		}
	}
	return false
}

func parseParam(p param, raw json.RawMessage) (any, error) {
	switch p.typ {
	case typeInt:
		var n int
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
			return nil, fmt.Errorf("want a whole number of 0 or more")
		}
		return n, nil
	case typeDuration:
		return parseDuration(raw)
	default:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("want a string")
		}
		return s, nil
	}
}

func (a faultArgs) str(name string) string        { v, _ := a[name].(string); return v }
func (a faultArgs) int(name string) int           { v, _ := a[name].(int); return v }
func (a faultArgs) dur(name string) time.Duration { v, _ := a[name].(time.Duration); return v }
