package poppytest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// sseFrame is one server-sent event, as the HTML standard's parser
// dispatches it.
type sseFrame struct {
	id, event, data string
	hasID           bool
}

// stream is an open event stream read in the background.
type stream struct {
	status int
	header http.Header
	body   []byte // the answer when it is not a stream
	frames chan sseFrame
	err    chan error // how the stream ended: nil for a clean end
	close  func()
}

// openStream asks for the events of id as a stream (Poppy 0.1 §7.6).
func (a *convAgent) openStream(id, query string, header http.Header) *stream {
	a.t.Helper()
	u := testConvURL + "/" + id + "/events"
	full := u
	if query != "" {
		full += "?" + query
	}
	req, _ := http.NewRequest("GET", full, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "DPoP "+a.token)
	req.Header.Set("DPoP", a.proof("GET", u, a.token, "", nil))
	resp, err := a.s.Client().Do(req)
	if err != nil {
		a.t.Fatalf("stream: %v", err)
	}
	st := &stream{status: resp.StatusCode, header: resp.Header, frames: make(chan sseFrame, 100),
		err: make(chan error, 1), close: func() { resp.Body.Close() }}
	a.t.Cleanup(st.close)
	if resp.StatusCode != 200 {
		st.body, _ = io.ReadAll(resp.Body)
		return st
	}
	go func() {
		defer close(st.frames)
		st.err <- parseSSE(resp.Body, st.frames)
	}()
	return st
}

// parseSSE reads frames until the stream ends. A clean end returns nil.
func parseSSE(r io.Reader, out chan<- sseFrame) error {
	br := bufio.NewReader(r)
	var f sseFrame
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				return nil
			}
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if data != nil {
				f.data = strings.Join(data, "\n")
				out <- f
			}
			f, data = sseFrame{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			f.id, f.hasID = value, true
		case "event":
			f.event = value
		case "data":
			data = append(data, value)
		}
	}
}

// next returns the next n frames, failing if the stream ends first.
func (st *stream) next(t *testing.T, n int) []sseFrame {
	t.Helper()
	var out []sseFrame
	for len(out) < n {
		select {
		case f, ok := <-st.frames:
			if !ok {
				t.Fatalf("stream ended after %d of %d frames: %v", len(out), n, <-st.err)
			}
			out = append(out, f)
		case <-time.After(10 * time.Second):
			t.Fatalf("no frame %d of %d", len(out)+1, n)
		}
	}
	return out
}

// end waits for the stream to end and returns how.
func (st *stream) end(t *testing.T) (extra []sseFrame, err error) {
	t.Helper()
	for {
		select {
		case f, ok := <-st.frames:
			if !ok {
				return extra, <-st.err
			}
			extra = append(extra, f)
		case <-time.After(10 * time.Second):
			t.Fatalf("the stream did not end")
		}
	}
}

// eventFrames keeps the frames with an id, decoded.
func eventFrames(t *testing.T, frames []sseFrame) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range frames {
		if !f.hasID {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil || ev["id"] != f.id || f.event != "" {
			t.Fatalf("frame %+v: %v", f, err)
		}
		out = append(out, ev)
	}
	return out
}

// wantDeltas checks that each Company message is preceded by text-delta
// frames, without an id, whose pieces make its text.
func wantDeltas(t *testing.T, frames []sseFrame) {
	t.Helper()
	var pieces []string
	for _, f := range frames {
		if f.event == "text-delta" {
			var d map[string]string
			if f.hasID || json.Unmarshal([]byte(f.data), &d) != nil || d["message_id"] == "" {
				t.Fatalf("text-delta frame %+v", f)
			}
			pieces = append(pieces, d["text"])
			continue
		}
		var ev struct {
			Message *struct{ Role, Text string }
		}
		_ = json.Unmarshal([]byte(f.data), &ev)
		if ev.Message != nil && ev.Message.Role == "company" && strings.Join(pieces, "") != ev.Message.Text {
			t.Errorf("pieces %q before %q", pieces, ev.Message.Text)
		}
		if ev.Message != nil && ev.Message.Role == "company" && len(pieces) < 2 {
			t.Errorf("only %d pieces before %q", len(pieces), ev.Message.Text)
		}
		pieces = nil
	}
}

func TestStream(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	st := a.openStream(id, "", nil)
	if st.status != 200 || st.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream answer %d %q %s", st.status, st.header.Get("Content-Type"), st.body)
	}
	frames := st.next(t, 4+3) // four events, three text-delta pieces before the reply
	got := eventFrames(t, frames)
	// Poppy 0.1 §7.6: "the same event JSON as data"
	if diff := cmp.Diff(events(a.read(id, "")), got); diff != "" {
		t.Errorf("stream and read differ (-read +stream):\n%s", diff)
	}
	wantDeltas(t, frames)

	// New events arrive on the open stream.
	a.send(id, msg("more"), "")
	frames = st.next(t, 4+3)
	live := eventFrames(t, frames)
	if live[0]["message"].(map[string]any)["text"] != "more" || live[3]["status"] != "idle" {
		t.Errorf("live events %v", live)
	}
	wantDeltas(t, frames)

	// Closing ends the stream after the closed state event.
	a.request("POST", "/"+id+"/close", "", map[string]any{}, nil)
	extra, err := st.end(t)
	if err != nil || len(extra) != 1 || !strings.Contains(extra[0].data, `"status":"closed"`) {
		t.Errorf("end of stream: %v, %+v", err, extra)
	}
	wantNoViolation(t, s, rt)
}

func TestStreamResumes(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	evs := s.Events(id)
	// Poppy 0.1 §7.6: "The Personal Agent reconnects with Last-Event-ID ... in place of cursor."
	st := a.openStream(id, "cursor="+evs[0].ID, http.Header{"Last-Event-Id": {evs[1].ID}})
	got := eventFrames(t, st.next(t, 3+2)) // the reply (three pieces) and the idle state
	if got[0]["id"] != evs[2].ID || got[1]["id"] != evs[3].ID {
		t.Errorf("resumed at %v, want %s", got[0]["id"], evs[2].ID)
	}
	st = a.openStream(id, "cursor="+evs[2].ID, nil)
	if got := eventFrames(t, st.next(t, 1)); got[0]["id"] != evs[3].ID {
		t.Errorf("stream from a cursor starts at %v", got[0]["id"])
	}
	st = a.openStream(id, "", http.Header{"Last-Event-Id": {"evt_gone"}})
	if st.status != 410 || !strings.Contains(string(st.body), "cursor_expired") {
		t.Errorf("unknown Last-Event-ID: %d %s", st.status, st.body)
	}
	wantNoViolation(t, s, rt)
}

func TestDropStreamAfter(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	evs := s.Events(id)
	s.DropStreamAfter(2) // before the Company's reply, the third event
	st := a.openStream(id, "", nil)
	frames, err := st.end(t)
	if err == nil {
		t.Errorf("the stream ended cleanly; want it broken")
	}
	if len(frames) != 3 || frames[2].event != "text-delta" || len(eventFrames(t, frames)) != 2 {
		t.Fatalf("frames before the drop: %+v", frames)
	}
	// The reconnect gets the whole message; the knob acted once.
	st = a.openStream(id, "", http.Header{"Last-Event-Id": {evs[1].ID}})
	frames = st.next(t, 3+2)
	wantDeltas(t, frames)
	if got := eventFrames(t, frames); got[0]["id"] != evs[2].ID {
		t.Errorf("after the drop: %v", got)
	}
	wantNoViolation(t, s, rt)
}

func TestStreamLifetime(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, &poppytest.Options{StreamLifetime: 100 * time.Millisecond})
	st := a.openStream(id, "", nil)
	frames, err := st.end(t)
	if err != nil || len(eventFrames(t, frames)) != 4 {
		t.Errorf("stream ended by its lifetime: %v after %d frames", err, len(frames))
	}
	wantNoViolation(t, s, rt)
}

func TestJSONWithoutStreamAccept(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	id := a.mustStart("hello")
	r := a.request("GET", "/"+id+"/events", "", nil, http.Header{"Accept": {"application/json"}})
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || r.str("cursor") == "" {
		t.Errorf("read with Accept: application/json: %d %v", r.status, r.header)
	}
	wantNoViolation(t, s, rt)
}

// companyIDs matches the IDs the Company chooses, which are random.
var companyIDs = regexp.MustCompile(`\b(cnv|evt|msg|ret|exc)_[A-Za-z0-9_-]{6,}`)

// normalizeIDs numbers the Company's IDs in order of appearance.
func normalizeIDs(b []byte) []byte {
	seen := map[string]string{}
	return companyIDs.ReplaceAllFunc(b, func(id []byte) []byte {
		if _, ok := seen[string(id)]; !ok {
			kind, _, _ := strings.Cut(string(id), "_")
			seen[string(id)] = fmt.Sprintf("%s_%d", kind, len(seen)+1)
		}
		return []byte(seen[string(id)])
	})
}

// TestConversationGolden records what crosses the wire in one scripted
// conversation: the JSON read of every event, and the same as a stream.
func TestConversationGolden(t *testing.T) {
	s, rt, a := newConvCompany(t, &poppytest.Options{AgentDelay: -1})
	a.signIn("acct_dana", "poppy:read", "poppy:write")
	r := a.start(map[string]any{"id": "msg_g1", "sender": "agent",
		"text":    "The jacket from order #1042 isn't warm enough. The user wants to return it.",
		"context": map[string]any{"locale": "en-US", "time_zone": "America/Los_Angeles", "user_available": true}})
	id := r.str("conversation_id")
	_, last := a.settle(id, "")
	a.send(id, map[string]any{"id": "msg_g2", "sender": "agent", "context": map[string]any{"user_available": false}}, "")
	a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil)
	p := s.Person(id)
	if p.Join() != nil || p.Say("I've reviewed the return. Anything else?") != nil || p.Leave("") != nil {
		t.Fatal("person")
	}
	a.send(id, map[string]any{"id": "msg_g3", "sender": "human", "text": "No, thanks.", "data": map[string]any{"done": true}}, "")
	a.settle(id, last.str("cursor"))
	a.request("POST", "/"+id+"/close", "", map[string]any{}, nil)

	read := a.read(id, "")
	body, _ := json.MarshalIndent(read.body, "", "  ")
	st := a.openStream(id, "", nil)
	frames, err := st.end(t)
	if err != nil {
		t.Fatal(err)
	}
	var sse bytes.Buffer
	for _, f := range frames {
		if f.hasID {
			fmt.Fprintf(&sse, "id: %s\n", f.id)
		}
		if f.event != "" {
			fmt.Fprintf(&sse, "event: %s\n", f.event)
		}
		fmt.Fprintf(&sse, "data: %s\n\n", f.data)
	}
	got := normalizeIDs([]byte("# GET events (JSON)\n" + string(body) + "\n\n# GET events (text/event-stream)\n" + sse.String()))
	golden.Check(t, "testdata/conversation.golden", got)
	wantNoViolation(t, s, rt)
}
