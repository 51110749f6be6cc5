package conversation

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readAll parses a whole stream.
func readAll(t *testing.T, r io.Reader, limit int) ([]sseEvent, *sseReader, error) {
	t.Helper()
	p := newSSEReader(r, limit, limit)
	var out []sseEvent
	for {
		e, err := p.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, p, err
		}
		out = append(out, e)
	}
}

// TestSSEParser checks the rules of HTML Living Standard §9.2.6, many with
// the standard's own examples.
func TestSSEParser(t *testing.T) {
	msg := func(data, id string, own bool) sseEvent {
		return sseEvent{Type: "message", Data: data, ID: id, HasID: own}
	}
	tests := []struct {
		name, in string
		want     []sseEvent
	}{
		{"standard example: comment, multi-line data, id carries over",
			"data: This is the first message.\n\ndata: This is the second message, it\ndata: has two lines.\n\ndata: This is the third message.\n\n",
			[]sseEvent{msg("This is the first message.", "", false), msg("This is the second message, it\nhas two lines.", "", false), msg("This is the third message.", "", false)}},
		{"standard example: event types",
			"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
			[]sseEvent{{Type: "add", Data: "73857293"}, {Type: "remove", Data: "2153"}, {Type: "add", Data: "113411"}}},
		{"standard example: the space after the colon is optional, once",
			"data:test\n\ndata: test\n\ndata:  test\n\n",
			[]sseEvent{msg("test", "", false), msg("test", "", false), msg(" test", "", false)}},
		{"standard example: data with no value dispatches an empty string; the last block is not dispatched",
			"data\n\ndata\ndata\n\ndata:\n",
			[]sseEvent{msg("", "", false), msg("\n", "", false)}},
		{"CR, CRLF and LF line ends mixed",
			"id: evt_1\rdata: a\r\n\ndata: b\r\rdata: c\n\r\n",
			[]sseEvent{msg("a", "evt_1", true), msg("b", "evt_1", false), msg("c", "evt_1", false)}},
		{"a leading BOM is dropped, once",
			"\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n",
			[]sseEvent{msg("x", "", false)}},
		{"comments and unknown fields are ignored",
			": keep-alive\nfoo: bar\ndata: x\n:another\n\n",
			[]sseEvent{msg("x", "", false)}},
		{"an id with NULL is ignored; an empty id resets",
			"id: a\x00b\ndata: x\n\nid: evt_2\ndata: y\n\nid\ndata: z\n\n",
			[]sseEvent{msg("x", "", false), msg("y", "evt_2", true), msg("z", "", true)}},
		{"an event without data is not dispatched but its id is kept",
			"id: evt_3\nevent: ping\n\ndata: after\n\n",
			[]sseEvent{msg("after", "evt_3", false)}},
		{"an incomplete event at the end is discarded",
			"data: whole\n\ndata: cut",
			[]sseEvent{msg("whole", "", false)}},
		{"an incomplete line at the end is discarded",
			"data: whole\n\ndata: x\n",
			[]sseEvent{msg("whole", "", false)}},
		{"invalid UTF-8 becomes U+FFFD",
			"data: a\xffb\n\n",
			[]sseEvent{msg("a\uFFFDb", "", false)}},
		{"a field name is the whole line without a colon",
			"event\ndata\n\n",
			[]sseEvent{msg("", "", false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, _, err := readAll(t, r, 1<<10)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(sseEvent{})); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestSSERetry(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"retry: 2500\n\n":                  2500 * time.Millisecond,
		"retry: 25x\n\n":                   0,
		"retry: -5\n\n":                    0,
		"retry:\n\n":                       0,
		"retry: 99999999999999999999999\n": maxRetry,
		"retry: 1000\nretry: oops\n":       time.Second,
	} {
		_, p, err := readAll(t, strings.NewReader(in), 1<<10)
		if err != nil || p.retry != want {
			t.Errorf("%q: retry %v (err %v), want %v", in, p.retry, err, want)
		}
	}
}

func TestSSELimits(t *testing.T) {
	long := "data: " + strings.Repeat("x", 100) + "\n\n"
	if _, _, err := readAll(t, strings.NewReader(long), 64); !errors.Is(err, errSSETooLarge) {
		t.Errorf("a long line: err %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("x", 30)+"\n", 5) + "\n"
	if _, _, err := readAll(t, strings.NewReader(many), 64); !errors.Is(err, errSSETooLarge) {
		t.Errorf("a large event: err %v", err)
	}
	fine := strings.Repeat("data: "+strings.Repeat("x", 30)+"\n\n", 50)
	if got, _, err := readAll(t, strings.NewReader(fine), 64); err != nil || len(got) != 50 {
		t.Errorf("many small events: %d, %v", len(got), err)
	}
}

// TestSSELinesLongerThanTheBuffer: lines and events many times the read
// buffer (sseBuffer, small since thousands of streams wait at once) are
// read whole, within the limits, even from a reader giving one byte at a
// time; a line past maxLine is still refused.
func TestSSELinesLongerThanTheBuffer(t *testing.T) {
	t.Parallel()
	value := strings.Repeat("é", 4*sseBuffer) // multi-byte runes across the buffer's ends
	stream := "id: " + strings.Repeat("7", 3*sseBuffer) + "\r\ndata: " + value + "\rdata: end\n\n"
	for name, r := range map[string]io.Reader{"whole": strings.NewReader(stream), "byte by byte": iotest.OneByteReader(strings.NewReader(stream))} {
		got, _, err := readAll(t, r, 16*sseBuffer)
		if err != nil || len(got) != 1 || got[0].Data != value+"\nend" || got[0].ID != strings.Repeat("7", 3*sseBuffer) {
			t.Errorf("%s: %d events, err %v", name, len(got), err)
		}
	}
	if _, _, err := readAll(t, strings.NewReader(stream), 2*sseBuffer); !errors.Is(err, errSSETooLarge) {
		t.Errorf("a line past maxLine: err %v", err)
	}
}

// TestSSENoWaitAfterCR: an event ended by CR is dispatched without waiting
// for the next byte, which might never come.
func TestSSENoWaitAfterCR(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		p := newSSEReader(pr, 1<<10, 1<<10)
		go pw.Write([]byte("data: now\r\r")) // then nothing
		got := make(chan sseEvent, 1)
		go func() {
			e, _ := p.Next()
			got <- e
		}()
		select {
		case e := <-got:
			if e.Data != "now" {
				t.Errorf("got %v", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the event ended by CR was held back")
		}
		pw.Close()
	})
}
