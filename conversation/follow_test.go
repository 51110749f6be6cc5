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
	"sync"
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

// TestHasMoreNothingNew: a page with has_more that brings nothing new is
// read again at once, as §7.5 says ("When has_more is true, the Personal
// Agent reads again right away"), within the wait and the call's limits:
// the events that follow are read, and a Company that never stops saying
// has_more ends the call at the limit with more waiting, not with an error.
// The old code called such a page a protocol error.
func TestHasMoreNothingNew(t *testing.T) {
	for name, page := range map[string]func(w http.ResponseWriter, cursor string, n int){
		"no events": func(w http.ResponseWriter, cursor string, n int) {
			writePage(w, nil, cursor, true)
		},
		"the same event again": func(w http.ResponseWriter, cursor string, n int) {
			writePage(w, []string{companyEvent("evt_x1", "Again")}, "evt_x1", true)
		},
		"two events in turn": func(w http.ResponseWriter, cursor string, n int) {
			next := map[string]string{"evt_x1": "evt_x2"}[cursor]
			if next == "" {
				next = "evt_x1"
			}
			writePage(w, []string{companyEvent(next, "Round")}, next, true)
		},
		"empty pages, then the news": func(w http.ResponseWriter, cursor string, n int) {
			if n < 3 {
				writePage(w, nil, cursor, true)
				return
			}
			writePage(w, []string{companyEvent("evt_news", "At last")}, "evt_news", false)
		},
	} {
		t.Run(name, func(t *testing.T) {
			co := newCompany(t, nil, nil)
			const pages = 5
			tr := co.trackerWith(t, &TrackerOptions{MaxPages: pages})
			u := started(t, tr, "Hello")
			before := len(eventReads(co, u.ConversationID))
			var mu sync.Mutex
			n := 0
			misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) {
				mu.Lock()
				n++
				k := n
				mu.Unlock()
				page(w, cursor, k)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends the old endless loop
			defer cancel()
			endless := name != "empty pages, then the news"
			for i, o := range []*ReadOptions{{Wait: 3 * time.Second}, {Wait: 3 * time.Second, Stream: true}} {
				r, err := tr.Read(ctx, u.ConversationID, o)
				switch {
				case err != nil:
					t.Fatalf("read %+v: %v", o, err)
				case !endless && i == 0 && (r.More || !slices.Equal(companyTexts(r.Events), []string{"At last"})):
					t.Errorf("the news after empty pages: %q, more %v", companyTexts(r.Events), r.More)
				case endless && !r.More:
					t.Errorf("read %+v: a Company that never stops saying has_more: more waiting not said", o)
				}
			}
			if n := len(eventReads(co, u.ConversationID)) - before; n > 2*pages {
				t.Errorf("%d reads for two calls of at most %d requests", n, pages)
			}
		})
	}
}

// TestEndlessHasMore: a Company that answers has_more forever with new
// events (20,431 requests in 5 s against the old code, every event kept)
// is read up to the call's limits, even with no wait: at most MaxPages
// requests and MaxEvents events, the cursor saved after the last event
// handled, and the next call goes on from there.
func TestEndlessHasMore(t *testing.T) {
	co := newCompany(t, nil, nil)
	tr := co.trackerWith(t, &TrackerOptions{MaxPages: 4, MaxEvents: 10})
	u := started(t, tr, "Hello")
	before := len(eventReads(co, u.ConversationID))
	var mu sync.Mutex
	var cursors []string
	misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) {
		mu.Lock()
		k := len(cursors)
		cursors = append(cursors, cursor)
		mu.Unlock()
		a, b := fmt.Sprintf("evt_e%da", k), fmt.Sprintf("evt_e%db", k)
		writePage(w, []string{companyEvent(a, "More"), companyEvent(b, "And more")}, b, true)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends the old endless loop
	defer cancel()
	r, err := tr.Read(ctx, u.ConversationID, nil) // wait_seconds 0
	if err != nil {
		t.Fatal(err)
	}
	reads := len(eventReads(co, u.ConversationID)) - before
	if !r.More || reads != 4 || len(r.Events) != 8 {
		t.Fatalf("one call: %d reads, %d events, more %v; want 4 reads (MaxPages), 8 events, more", reads, len(r.Events), r.More)
	}
	rec, _ := co.st.Conversation(ctx, co.ac.Issuer, u.ConversationID)
	if rec.Cursor != "evt_e3b" {
		t.Errorf("saved cursor %q, want evt_e3b", rec.Cursor)
	}
	r, err = tr.Read(ctx, u.ConversationID, &ReadOptions{Wait: 2 * time.Second, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.More || len(r.Events) != 8 || cursors[4] != "evt_e3b" {
		t.Errorf("the next call: %d events, more %v, from cursor %q; want 8, more, from evt_e3b", len(r.Events), r.More, cursors[4])
	}
}

// TestEventsLimitInAPage: a page with more events than a call may handle
// is handled up to the limit; the cursor is saved after the last event
// handled (§7.5: "Each event's id is also a cursor"), and the next call
// reads the rest from there.
func TestEventsLimitInAPage(t *testing.T) {
	co := newCompany(t, nil, nil)
	tr := co.trackerWith(t, &TrackerOptions{MaxEvents: 3})
	u := started(t, tr, "Hello")
	var evs []string
	for i := range 5 {
		evs = append(evs, companyEvent(fmt.Sprintf("evt_p%d", i), fmt.Sprintf("Part %d", i)))
	}
	misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) {
		switch cursor {
		case "evt_p2":
			writePage(w, evs[3:], "evt_p4", false)
		case "evt_p4":
			writePage(w, nil, "evt_p4", false)
		default:
			writePage(w, evs, "evt_p4", false)
		}
	})
	ctx := context.Background()
	r, err := tr.Read(ctx, u.ConversationID, nil)
	if err != nil || !r.More || !slices.Equal(companyTexts(r.Events), []string{"Part 0", "Part 1", "Part 2"}) {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	r, err = tr.Read(ctx, u.ConversationID, nil)
	if err != nil || r.More || !slices.Equal(companyTexts(r.Events), []string{"Part 3", "Part 4"}) {
		t.Fatalf("second call: %+v, %v", r, err)
	}
}

// TestDeltaFlood: a stream of text-delta pieces, each of a new message
// (a heap of 505 MiB in 8 s against the old code, through the progress
// notifications it caused), shows pieces of at most MaxPartialMessages
// messages, MaxPieces pieces of each and none of a message ID that is not
// one; what it keeps does not grow with the flood.
func TestDeltaFlood(t *testing.T) {
	co := newCompany(t, nil, nil)
	tr := co.trackerWith(t, &TrackerOptions{MaxPartialMessages: 3, MaxPieces: 2})
	u := started(t, tr, "Hello")
	misbehave(co, func(w http.ResponseWriter, r *http.Request, cursor string) {
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			writePage(w, nil, cursor, false)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 2000 {
			fmt.Fprintf(w, "event: text-delta\ndata: {\"message_id\":\"msg_f%d\",\"text\":\"piece \"}\n\n", i)
			fmt.Fprintf(w, "event: text-delta\ndata: {\"message_id\":\"msg_same\",\"text\":\"again \"}\n\n")
		}
		fmt.Fprintf(w, "event: text-delta\ndata: {\"message_id\":\"not an id!\",\"text\":\"x\"}\n\n")
		io.WriteString(w, "id: evt_d1\ndata: "+companyEvent("evt_d1", "Whole at last")+"\n\n")
	})
	var shown []string
	r, err := tr.Read(context.Background(), u.ConversationID, &ReadOptions{Wait: 3 * time.Second, Stream: true,
		Progress: func(p Progress) {
			if p.Delta != nil {
				shown = append(shown, p.Delta.MessageID)
			}
		}})
	if err != nil || !slices.Equal(companyTexts(r.Events), []string{"Whole at last"}) {
		t.Fatalf("%+v, %v", r, err)
	}
	// msg_f0, msg_same (twice), msg_f1: three messages, two pieces each at most.
	if want := []string{"msg_f0", "msg_same", "msg_f1", "msg_same"}; !slices.Equal(shown, want) {
		t.Errorf("pieces shown of %q, want %q", shown, want)
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
