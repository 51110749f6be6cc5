package poppytest

// This file keeps each conversation's ordered list of events and serves
// reads of it (Poppy 0.1 §7.5): from a cursor, held for up to wait seconds,
// a page at a time with has_more, always with cursor, status and responder.
// A read that asks for text/event-stream is streamed instead (sse.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxWait caps a request's wait (Poppy 0.1 §7.5: the Company "MAY return
// sooner, or cap wait").
const maxWait = 60 * time.Second

// defaultPageSize is the most events a read returns when
// Options.EventPageSize is zero.
const defaultPageSize = 100

// readQuery is the cursor and wait of a read, or of a POST that asks for
// the reply in its response (Poppy 0.1 §7.3).
type readQuery struct {
	cursor    string
	hasCursor bool
	wait      time.Duration
	hasWait   bool
}

// parseReadQuery reads cursor and wait from the request's query.
func parseReadQuery(r *http.Request) (readQuery, *convError) {
	var q readQuery
	v := r.URL.Query()
	for _, name := range []string{"cursor", "wait"} {
		if len(v[name]) > 1 {
			return q, newConvError("invalid_request", "%s given %d times", name, len(v[name]))
		}
	}
	if v.Has("cursor") {
		q.cursor, q.hasCursor = v.Get("cursor"), true
		if !idPattern.MatchString(q.cursor) {
			return q, newConvError("invalid_request", "cursor %q is not an event ID", q.cursor)
		}
	}
	if v.Has("wait") {
		secs, err := strconv.ParseFloat(v.Get("wait"), 64)
		if err != nil || secs < 0 || secs != secs {
			return q, newConvError("invalid_request", "wait %q is not a number of seconds", v.Get("wait"))
		}
		q.hasWait, q.wait = true, maxWait
		if secs < maxWait.Seconds() {
			q.wait = time.Duration(secs * float64(time.Second))
		}
	}
	return q, nil
}

// handleEvents serves a read of a conversation's events (Poppy 0.1 §7.5), or
// a stream of them (§7.6).
func (s *convState) handleEvents(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Authenticate(w, r, "")
	if !ok {
		return
	}
	id := r.PathValue("id")
	q, e := parseReadQuery(r)
	if e == nil {
		e = s.withConv(id, c, func(cv *convRecord) *convError {
			s.resumePending(cv, c) // Poppy 0.1 §7.11: "It then continues the same conversation with the new token."
			return nil
		})
	}
	if e == nil && wantsStream(r) {
		s.streamEvents(w, r, id, c, q)
		return
	}
	if e == nil {
		var body *readResponse
		if body, e = s.readEvents(r.Context(), id, c, q, false); e == nil {
			writeJSON(w, http.StatusOK, body)
			return
		}
	}
	s.writeConvError(w, r, e)
}

// wantsStream reports whether the request accepts text/event-stream (§7.6:
// "The Personal Agent asks for a stream by sending Accept: text/event-stream").
func wantsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// readResponse is a read's answer (Poppy 0.1 §7.5), also the answer of a
// POST that asked for the reply (§7.3).
type readResponse struct {
	ConversationID string      `json:"conversation_id"`
	Events         []wireEvent `json:"events"`
	Cursor         string      `json:"cursor"`
	HasMore        bool        `json:"has_more"`
	Status         string      `json:"status"`
	Responder      string      `json:"responder"`
}

// readEvents reads the events after q's cursor, holding for up to q.wait
// until there is one (Poppy 0.1 §7.5). afterPost holds instead until the
// Company has finished its turn, so that a POST with wait gets the reply
// and not only its own message (§7.3).
func (s *convState) readEvents(ctx context.Context, id string, c *Caller, q readQuery, afterPost bool) (*readResponse, *convError) {
	timer := time.NewTimer(q.wait) // real time, not Options.Now: the agent waits on the wall clock
	defer timer.Stop()
	timedOut := !q.hasWait
	for {
		var body *readResponse
		var changed chan struct{}
		e := s.withConv(id, c, func(cv *convRecord) *convError {
			s.endlessPage(cv)
			evs, more, ok := cv.after(q.cursor, s.pageSize())
			more = more || s.opts.EndlessHasMore
			if !ok {
				// Poppy 0.1 §7.5: "A cursor for events it no longer has returns cursor_expired."
				return newConvError("cursor_expired", "cursor %q names no event the Company holds", q.cursor)
			}
			ready := len(evs) > 0
			if afterPost {
				ready = cv.Status != StatusWorking
			}
			if ready || more || timedOut || cv.Status == StatusClosed {
				if len(evs) > 0 {
					evs = append(cv.replay(q.cursor, s.replayCount()), evs...)
				}
				body = s.readBody(cv, evs, more, q.cursor)
			}
			changed = cv.changed
			return nil
		})
		if e != nil || body != nil {
			return body, e
		}
		select {
		case <-changed:
		case <-timer.C:
			timedOut = true // Poppy 0.1 §7.5: "A read that times out returns an empty events list."
		case <-ctx.Done():
			timedOut = true // the client left; answer what there is
		}
	}
}

// readBody is the answer for evs. The caller holds st.mu.
func (s *convState) readBody(cv *convRecord, evs []Event, more bool, cursor string) *readResponse {
	// Poppy 0.1 §7.5: "Every successful read MUST include cursor, has_more, status, and responder, even with no events."
	body := &readResponse{ConversationID: cv.ID, Events: []wireEvent{}, Cursor: cursor, HasMore: more,
		Status: cv.Status, Responder: cv.Responder}
	for _, ev := range evs {
		body.Events = append(body.Events, toWire(ev))
	}
	if len(evs) > 0 {
		body.Cursor = evs[len(evs)-1].ID // "cursor is the last event returned, or the request's cursor if there were none"
	}
	return body
}

func (s *convState) pageSize() int {
	if s.opts.EventPageSize > 0 {
		return s.opts.EventPageSize
	}
	return defaultPageSize
}

// after returns up to limit events after the event cursor ("" for the
// beginning, Poppy 0.1 §7.5: "Without a cursor, the read starts at the
// beginning of the conversation"), whether more follow, and false when the
// cursor names no event held. limit <= 0 means all. The caller holds st.mu.
func (cv *convRecord) after(cursor string, limit int) ([]Event, bool, bool) {
	start := 0
	if cursor != "" {
		start = -1
		for i := range cv.events {
			if cv.events[i].ID == cursor {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, false, false
		}
	}
	evs := cv.events[start:]
	more := limit > 0 && len(evs) > limit
	if more {
		evs = evs[:limit]
	}
	return evs, more, true
}

// endlessPage adds a page's worth of news for Options.EndlessHasMore. The
// caller holds st.mu.
func (s *convState) endlessPage(cv *convRecord) {
	if !s.opts.EndlessHasMore || cv.Status == StatusClosed {
		return
	}
	m := Message{ID: "msg_" + randomString(9), Role: "company", Sender: ResponderAgent,
		Text: fmt.Sprintf("There is more to read (event %d).", len(cv.events)+1), Time: s.timeNow()}
	s.addEvent(cv, Event{Type: "message", Message: &m})
}

// replayCount is how many events reads return again (Options.ReplayEvents).
func (s *convState) replayCount() int {
	if s.opts.ReplayEvents == 0 {
		return 1
	}
	return max(s.opts.ReplayEvents, 0)
}

// replay returns a copy of up to n events up to and including the event
// cursor, to return again (Poppy 0.1 §7.5: "A read after a reconnect can
// return events again"). A read from the beginning replays nothing. The
// caller holds st.mu.
func (cv *convRecord) replay(cursor string, n int) []Event {
	if cursor == "" || n <= 0 {
		return nil
	}
	for i := range cv.events {
		if cv.events[i].ID == cursor {
			return slices.Clone(cv.events[max(i+1-n, 0) : i+1])
		}
	}
	return nil
}

// checkCursor checks the cursor of a POST that asks for the reply. The
// caller holds st.mu.
func checkCursor(cv *convRecord, q readQuery) *convError {
	if _, _, ok := cv.after(q.cursor, 1); !ok {
		return newConvError("cursor_expired", "cursor %q names no event the Company holds", q.cursor)
	}
	return nil
}

// addEvent appends ev to cv with a new ID and the time, and wakes readers.
// The caller holds st.mu.
func (s *convState) addEvent(cv *convRecord, ev Event) {
	ev.ID = "evt_" + randomString(9) // Poppy 0.1 §7.2: the Company chooses event IDs; random, so agents can't sort them
	ev.Time = s.timeNow()
	cv.events = append(cv.events, ev)
	close(cv.changed)
	cv.changed = make(chan struct{})
	if f := s.opts.OnEvent; f != nil {
		if ev.Message != nil {
			m := *ev.Message
			ev.Message = &m
		}
		f(cv.ID, ev)
	}
}

// setState changes status and responder, adding a state event if either
// changed (Poppy 0.1 §7.7: "Every change to either one adds a state event
// with both"). The caller holds st.mu.
func (s *convState) setState(cv *convRecord, status, responder string) {
	if cv.Status == status && cv.Responder == responder {
		return
	}
	cv.Status, cv.Responder = status, responder
	s.addEvent(cv, Event{Type: "state", Status: status, Responder: responder})
}

// wireEvent is an event as the agent reads it (Poppy 0.1 §7.5; docs/spec-readings.md "Conversations").
type wireEvent struct {
	ID             string       `json:"id"`
	Type           string       `json:"type"`
	CreatedAt      string       `json:"created_at"`
	Message        *wireMessage `json:"message,omitempty"`
	Status         string       `json:"status,omitempty"`
	Responder      string       `json:"responder,omitempty"`
	Error          string       `json:"error,omitempty"`
	Scope          string       `json:"scope,omitempty"`
	Reason         string       `json:"reason,omitempty"`
	ConversationID string       `json:"conversation_id,omitempty"`
}

// wireMessage is a message inside an event.
type wireMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Sender  string          `json:"sender"`
	Text    string          `json:"text,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Context map[string]any  `json:"context,omitempty"`
}

// toWire converts an event for the agent.
func toWire(ev Event) wireEvent {
	w := wireEvent{ID: ev.ID, Type: ev.Type, CreatedAt: ev.Time.UTC().Format(time.RFC3339), // RFC 3339, §7.5
		Status: ev.Status, Responder: ev.Responder, Error: ev.Error, Scope: ev.Scope, Reason: ev.Reason,
		ConversationID: ev.ConversationID}
	if m := ev.Message; m != nil {
		w.Message = &wireMessage{ID: m.ID, Role: m.Role, Sender: m.Sender, Text: m.Text, Data: m.Data, Context: m.Context}
	}
	return w
}
