package conversation

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// FuzzSSE parses arbitrary streams: no panic, limits kept, valid UTF-8
// out, and the same events whether the bytes come at once or one by one.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"id: evt_c2\ndata: {\"id\":\"evt_c2\",\"type\":\"message\"}\n\n",
		"event: text-delta\ndata: {\"message_id\":\"msg_r2Kq\",\"text\":\"I can \"}\n\n",
		"\xEF\xBB\xBFdata: a\r\ndata: b\r\r: comment\rretry: 3000\r\n\r\n",
		"data\ndata:\ndata: x\n\n", "id: a\x00b\n\n", "data: \xff\xfe\n\n", "\r\n\r\n\n\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 256
		whole := parseFuzz(t, bytes.NewReader(b), limit)
		bytewise := parseFuzz(t, iotest.OneByteReader(bytes.NewReader(b)), limit)
		if len(whole) != len(bytewise) {
			t.Fatalf("%d events at once, %d byte by byte", len(whole), len(bytewise))
		}
		for i := range whole {
			if whole[i] != bytewise[i] {
				t.Fatalf("event %d: %v at once, %v byte by byte", i, whole[i], bytewise[i])
			}
		}
	})
}

func parseFuzz(t *testing.T, r io.Reader, limit int) []sseEvent {
	p := newSSEReader(r, limit, limit)
	var out []sseEvent
	for {
		e, err := p.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errSSETooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return out
		}
		if len(e.Data) > limit || e.Data == "" && e.Type == "" {
			t.Fatalf("event out of bounds: %v", e)
		}
		if !utf8.ValidString(e.Data) || !utf8.ValidString(e.Type) || !utf8.ValidString(e.ID) || strings.ContainsRune(e.ID, 0) {
			t.Fatalf("bad strings in %v", e)
		}
		out = append(out, e)
	}
}

// FuzzEvents parses arbitrary answers of a read and events: no panic, and
// every event kept has a valid ID, as does the cursor.
func FuzzEvents(f *testing.F) {
	for _, s := range []string{
		`{"conversation_id":"cnv_8f3Kd2","events":[{"id":"evt_c2","type":"message","created_at":"2026-10-08T19:03:00Z","message":{"id":"msg_r2Kq","role":"company","sender":"agent","text":"Hi","data":{"a":1}}}],"cursor":"evt_c2","has_more":false,"status":"idle","responder":"agent"}`,
		`{"events":[{"id":"evt_c4","type":"state","status":"idle","responder":"human"},{"id":"evt_d3","type":"authorization","error":"insufficient_scope","scope":"poppy:read poppy:write"}],"cursor":"evt_d3","has_more":true,"status":"idle","responder":"human"}`,
		`{"events":[{"id":"evt_c6","type":"user_requested","reason":"A specialist"},{"id":"e","type":"direct_opened","conversation_id":"cnv_x"},{"id":"x","type":"future"},{"type":"state"},{"id":"bad id"}],"status":"queued","responder":"agent"}`,
		`{"conversation_id":"cnv_1","status":"working","responder":"agent"}`, `[]`, `{"status":1}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePage(b, "evt_prev")
		if err == nil {
			if p.Cursor != "" && !validID(p.Cursor) || p.Status == "" || p.Responder == "" {
				t.Fatalf("page %+v", p)
			}
			for _, e := range p.Events {
				checkEvent(t, e)
			}
		}
		if e, err := parseEvent(b); err == nil {
			checkEvent(t, e)
		}
		if d, ok := parseTextDelta(string(b)); ok && d.Text == "" {
			t.Fatal("empty text delta")
		}
		var w eventWire
		if json.Unmarshal(b, &w) == nil && validID(w.ID) {
			if _, err := parseEvent(b); err != nil {
				t.Fatalf("an event with a valid id refused: %v", err)
			}
		}
	})
}

func checkEvent(t *testing.T, e Event) {
	t.Helper()
	if !validID(e.ID) {
		t.Fatalf("event with invalid id %q kept", e.ID)
	}
	switch e.Type {
	case EventMessage:
		if e.Message == nil {
			t.Fatal("message event without message")
		}
	case EventState:
		if e.Status == "" || e.Responder == "" {
			t.Fatal("state event without state")
		}
	case EventDirectOpened, EventDirectClosed:
		if !validID(e.ConversationID) {
			t.Fatal("direct event without a valid conversation_id")
		}
	}
}
