package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests replace the poppytest Company's read of events with one that
// misbehaves in a way the strict reference Company never does. Everything
// else stays real: the conversation is started at poppytest, and every read
// goes through the Client and the Session's client, signed with DPoP.

// misbehave makes handler answer every read of a conversation's events.
func misbehave(co *company, handler func(w http.ResponseWriter, r *http.Request, cursor string)) {
	co.srv.HandleFunc("api."+co.srv.Domain(), "GET /poppy/conversations/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "DPoP ") || r.Header.Get("DPoP") == "" {
			http.Error(w, "not through the Session", http.StatusUnauthorized)
			return
		}
		cursor := r.URL.Query().Get("cursor")
		if cursor == "" {
			cursor = r.Header.Get("Last-Event-ID")
		}
		handler(w, r, cursor)
	})
}

// writePage answers with a JSON page of events.
func writePage(w http.ResponseWriter, events []string, cursor string, hasMore bool) {
	raw := make([]json.RawMessage, len(events))
	for i, e := range events {
		raw[i] = json.RawMessage(e)
	}
	b, _ := json.Marshal(map[string]any{"events": raw, "cursor": cursor, "has_more": hasMore,
		"status": StatusIdle, "responder": ResponderAgent})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// companyEvent is the JSON of a message event from the Company.
func companyEvent(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"type":"message","created_at":"2026-10-08T19:03:00Z",`+
		`"message":{"id":"msg_%s","role":"company","sender":"agent","text":%q}}`, id, id, text)
}

// TestStreamCancelled: a caller who gives up while a stream is open gets
// the cancellation at once, not a success at the end of the wait.
func TestStreamCancelled(t *testing.T) {
	co := newCompany(t, nil, nil)
	var clock atomic.Int64
	tr := co.trackerWith(t, &TrackerOptions{Now: func() time.Time { clock.Add(1); return time.Now() }})
	u := started(t, tr, "Hello") // idle: the state event below is news
	misbehave(co, func(w http.ResponseWriter, r *http.Request, _ string) {
		// A Company that streams, says it is working, and holds the stream.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: evt_w1\ndata: {\"id\":\"evt_w1\",\"type\":\"state\",\"created_at\":\"2026-10-08T19:03:00Z\","+
			"\"status\":\"working\",\"responder\":\"agent\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock.Store(0)
	progress := func(p Progress) {
		if p.State != nil && p.State.Status == StatusWorking {
			cancel() // the caller gives up while the stream is open
		}
	}
	_, err := tr.Read(ctx, u.ConversationID, &ReadOptions{Wait: 3 * time.Second, Stream: true, Progress: progress})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled streamed read returned %v, want context.Canceled", err)
	}
	if n := clock.Load(); n > 100 {
		t.Errorf("the clock was read %d times: the wait spun after the cancellation", n)
	}
}

// TestEarlyEmptyReadsPaced: a Company that answers held reads at once with
// nothing (§7.5: it "MAY return sooner, or cap wait") is not read again at
// once, over JSON or when it answers a request for a stream with JSON.
func TestEarlyEmptyReadsPaced(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			co := newCompany(t, nil, nil)
			tr := co.tracker(t)
			u := started(t, tr, "Hello")
			before := len(eventReads(co, u.ConversationID))
			misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) {
				writePage(w, nil, cursor, false)
			})
			r, err := tr.Read(context.Background(), u.ConversationID, &ReadOptions{Wait: 1500 * time.Millisecond, Stream: stream})
			if err != nil || len(r.Events) != 0 {
				t.Fatalf("%+v, %v", r, err)
			}
			// A read at once, one after a pause of a second, and perhaps one more.
			n := len(eventReads(co, u.ConversationID)) - before
			t.Logf("%d reads", n)
			if n < 2 || n > 4 {
				t.Errorf("%d reads of a Company that answers at once in a wait of 1.5 s, want 2 to 4", n)
			}
		})
	}
}

// TestHasMoreWithoutProgress: has_more on a page that brings nothing new
// would be read again forever; it is a protocol error of §7.5 instead.
func TestHasMoreWithoutProgress(t *testing.T) {
	for name, page := range map[string]func(w http.ResponseWriter, cursor string){
		"no events": func(w http.ResponseWriter, cursor string) {
			writePage(w, nil, cursor, true)
		},
		"the same event again": func(w http.ResponseWriter, cursor string) {
			writePage(w, []string{companyEvent("evt_x1", "Again")}, "evt_x1", true)
		},
		"two events in turn": func(w http.ResponseWriter, cursor string) {
			next := map[string]string{"evt_x1": "evt_x2"}[cursor]
			if next == "" {
				next = "evt_x1"
			}
			writePage(w, []string{companyEvent(next, "Round")}, next, true)
		},
	} {
		t.Run(name, func(t *testing.T) {
			co := newCompany(t, nil, nil)
			tr := co.tracker(t)
			u := started(t, tr, "Hello")
			before := len(eventReads(co, u.ConversationID))
			misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) { page(w, cursor) })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends the old endless loop
			defer cancel()
			for _, o := range []*ReadOptions{nil, {Wait: 3 * time.Second, Stream: true}} {
				_, err := tr.Read(ctx, u.ConversationID, o)
				var pe *ProtocolError
				if !errors.As(err, &pe) || pe.Section != "7.5" {
					t.Errorf("read %+v: %v, want a protocol error of §7.5", o, err)
				}
			}
			if n := len(eventReads(co, u.ConversationID)) - before; n > 8 {
				t.Errorf("%d reads for two calls", n)
			}
		})
	}
}

// TestEmptyCursorWithEvents: a page that returns events with cursor ""
// goes on after its last event (§7.5: "cursor is the last event
// returned"), not from the beginning again.
func TestEmptyCursorWithEvents(t *testing.T) {
	p, err := parsePage([]byte(`{"events":[`+companyEvent("evt_x1", "Hi")+`],"cursor":"","has_more":true,"status":"idle","responder":"agent"}`), "evt_prev")
	if err != nil || p.Cursor != "evt_x1" {
		t.Fatalf("page %+v, %v: want cursor evt_x1", p, err)
	}
	p, err = parsePage([]byte(`{"events":[],"cursor":"","has_more":false,"status":"idle","responder":"agent"}`), "evt_prev")
	if err != nil || p.Cursor != "evt_prev" {
		t.Fatalf("page %+v, %v: want the request's cursor evt_prev", p, err)
	}

	co := newCompany(t, nil, nil)
	tr := co.tracker(t)
	u := started(t, tr, "Hello")
	var cursors []string
	misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) {
		cursors = append(cursors, cursor) // reads are one at a time
		if cursor == "evt_x1" {
			writePage(w, nil, "evt_x1", false)
			return
		}
		writePage(w, []string{companyEvent("evt_x1", "Hi")}, "", true)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends the old endless loop
	defer cancel()
	r, err := tr.Read(ctx, u.ConversationID, nil)
	if err != nil || !slices.Equal(companyTexts(r.Events), []string{"Hi"}) {
		t.Fatalf("%+v, %v", r, err)
	}
	if len(cursors) != 2 || cursors[1] != "evt_x1" {
		t.Errorf("reads from cursors %.5q, want the second from evt_x1", cursors)
	}
	rec, _ := co.st.Conversation(ctx, co.ac.Issuer, u.ConversationID)
	if rec.Cursor != "evt_x1" {
		t.Errorf("saved cursor %q, want evt_x1", rec.Cursor)
	}
}
