package poppytest

// This file streams a conversation's events with server-sent events (Poppy
// 0.1 §7.6, HTML Living Standard §9.2): each event with its ID as the SSE id
// and its JSON as data, and before each Company message, pieces of its text
// as text-delta events with no id. A reconnecting agent resumes with
// Last-Event-ID. DropStreamAfter breaks a stream in the middle of a message;
// Options.StreamLifetime ends streams cleanly.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// eventStreams is the conversations' concern of event streams. It holds
// no state of its own: the knobs it obeys (DropStreamAfter, FloodDeltas)
// are convState's, under its lock.
type eventStreams struct {
	*Server
}

// streamEvents streams the events after the cursor, or after Last-Event-ID,
// until the client leaves, the conversation closes, the stream's lifetime
// ends or the Server closes.
func (s *eventStreams) streamEvents(w http.ResponseWriter, r *http.Request, id string, c *Caller, q readQuery) {
	cursor, drop, ok := s.startStream(w, r, id, c, q)
	if !ok {
		return
	}
	replay := s.streamReplay(id, c, cursor)
	if s.flood(w) != nil {
		return
	}
	rc := http.NewResponseController(w)
	lifetime, stop := s.streamLifetime()
	defer stop()
	sent := 0
	for {
		evs, closed, changed, held := s.streamBatch(id, c, cursor)
		if !held {
			return // the cursor expired under the stream: end it, and the reconnect gets cursor_expired
		}
		if len(evs) > 0 {
			evs, replay = append(replay, evs...), nil // returned again beside the first new ones (ReplayEvents)
		}
		var open bool
		if cursor, open = s.sendBatch(w, rc, evs, &sent, drop, cursor); !open {
			return
		}
		if closed {
			return // everything up to the close is sent, and no event follows it
		}
		select {
		case <-changed:
		case <-lifetime:
			return // Poppy 0.1 §7.6: "The Company MAY close a stream at any time"
		case <-r.Context().Done():
			return
		}
	}
}

// streamLifetime is when a stream ends, Options.StreamLifetime after now
// (nil: never), and the function that stops its timer.
func (s *eventStreams) streamLifetime() (<-chan time.Time, func()) {
	if s.opts.StreamLifetime <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(s.opts.StreamLifetime)
	return t.C, func() { t.Stop() }
}

// sendBatch writes evs to the stream, breaking it before the event that
// would be the drop-th sent (DropStreamAfter), and counts them in sent. It
// returns the ID of the last event written, cursor if none, and whether the
// stream is still open.
func (s *eventStreams) sendBatch(w http.ResponseWriter, rc *http.ResponseController, evs []Event, sent *int, drop int, cursor string) (string, bool) {
	for _, ev := range evs {
		if *sent == drop {
			s.breakStream(w, rc, ev)
		}
		if writeSSEEvent(w, ev) != nil || rc.Flush() != nil {
			return cursor, false
		}
		cursor = ev.ID
		*sent++
	}
	return cursor, true
}

// startStream checks the stream's cursor, takes the DropStreamAfter knob
// and writes the stream's header. On failure it writes the error and
// returns false.
func (s *eventStreams) startStream(w http.ResponseWriter, r *http.Request, id string, c *Caller, q readQuery) (string, int, bool) {
	cursor := q.cursor
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		cursor = last // Poppy 0.1 §7.6: "The Personal Agent reconnects with Last-Event-ID ... in place of cursor."
	}
	drop := -1
	e := s.withConv(id, c, func(cv *convRecord) *convError {
		if _, _, ok := cv.after(cursor, 1); !ok {
			return newConvError("cursor_expired", "Last-Event-ID or cursor %q names no event the Company holds", cursor)
		}
		drop, s.convState.dropStream = s.convState.dropStream, -1
		return nil
	})
	if e != nil {
		s.writeConvError(w, r, e)
		return "", 0, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	return cursor, drop, true
}

// streamBatch returns a copy of the events after cursor, whether the
// conversation is closed, the channel that signals the next event, and
// false when the cursor names no event held.
func (s *eventStreams) streamBatch(id string, c *Caller, cursor string) ([]Event, bool, chan struct{}, bool) {
	var evs []Event
	var changed chan struct{}
	closed, held := false, false
	_ = s.withConv(id, c, func(cv *convRecord) *convError {
		evs, _, held = cv.after(cursor, 0)
		evs = append([]Event(nil), evs...)
		closed, changed = cv.Status == StatusClosed, cv.changed
		return nil
	})
	return evs, closed, changed, held
}

// flood writes the pieces FloodDeltas asked for, each of a new message.
func (s *eventStreams) flood(w http.ResponseWriter) error {
	s.convState.mu.Lock()
	n := s.convState.floodDeltas
	s.convState.floodDeltas = 0
	s.convState.mu.Unlock()
	for i := range n {
		if err := writeTextDelta(w, fmt.Sprintf("msg_flood%d", i), "piece "); err != nil {
			return err
		}
	}
	return http.NewResponseController(w).Flush()
}

// streamReplay returns the events a stream from cursor sends again before
// its first new ones (Options.ReplayEvents).
func (s *eventStreams) streamReplay(id string, c *Caller, cursor string) []Event {
	var evs []Event
	_ = s.withConv(id, c, func(cv *convRecord) *convError {
		evs = cv.replay(cursor, s.replayCount())
		return nil
	})
	return evs
}

// breakStream breaks the stream before ev, after the first piece of its text
// when it is a Company message, so the agent holds part of a message.
func (s *eventStreams) breakStream(w http.ResponseWriter, rc *http.ResponseController, ev Event) {
	if pieces := textPieces(ev); len(pieces) > 0 {
		_ = writeTextDelta(w, ev.Message.ID, pieces[0])
		_ = rc.Flush()
	}
	panic(http.ErrAbortHandler) // resets the stream (HTTP/2) or closes the connection (HTTP/1.1)
}

// writeSSEEvent writes the text-delta pieces of a Company message, then the
// event itself.
func writeSSEEvent(w http.ResponseWriter, ev Event) error {
	for _, p := range textPieces(ev) {
		if err := writeTextDelta(w, ev.Message.ID, p); err != nil {
			return err
		}
	}
	data, err := json.Marshal(toWire(ev))
	if err != nil {
		return err
	}
	// Poppy 0.1 §7.6: "each event has its event ID as the SSE id and the same event JSON as data"
	_, err = fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev.ID, data)
	return err
}

// writeTextDelta writes one piece of a message's text, with no SSE id
// (Poppy 0.1 §7.6: "pieces of its text as text-delta events, with no SSE id").
func writeTextDelta(w http.ResponseWriter, messageID, text string) error {
	data, err := json.Marshal(map[string]string{"message_id": messageID, "text": text})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: text-delta\ndata: %s\n\n", data)
	return err
}

// textPieces splits a Company message's text into up to three pieces at
// spaces. Other events have none.
func textPieces(ev Event) []string {
	if ev.Type != "message" || ev.Message == nil || ev.Message.Role != "company" || ev.Message.Text == "" {
		return nil
	}
	text := ev.Message.Text
	size := max(len(text)/3, 1)
	var pieces []string
	for len(text) > 0 && len(pieces) < 2 {
		i := strings.IndexByte(text[min(size, len(text)-1):], ' ')
		if i < 0 {
			break
		}
		cut := min(size, len(text)-1) + i + 1
		pieces = append(pieces, text[:cut])
		text = text[cut:]
	}
	if text != "" {
		pieces = append(pieces, text)
	}
	return pieces
}
