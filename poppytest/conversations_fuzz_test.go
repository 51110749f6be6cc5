package poppytest

// Fuzz and unit tests of the conversation parsers of agent input and of the
// Company Agent's matching. The Server is strict, so it must reject
// anything malformed without panicking, and accept only what §7 allows.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func FuzzMessageRequest(f *testing.F) {
	for _, seed := range []string{
		`{"message":{"id":"msg_Yq3v8LrT0aWc5NkE","sender":"agent","text":"The jacket from order #1042 isn't warm enough.","context":{"locale":"en-US","time_zone":"America/Los_Angeles","user_available":true}}}`,
		`{"parent_conversation_id":"cnv_8f3Kd2","message":{"id":"msg_Pe6jWm3Kd0RtXc8V","sender":"human","text":"Hi"}}`,
		`{"message":{"id":"msg_Ns8dXo1Gv6JpUa3C","sender":"agent","data":{"travelers":[{"name":"Dana Reyes","seat":"14A"}]}}}`,
		`{"message":{"id":"msg_Lw0eFj7Tc2RbVy5H","sender":"agent","context":{"user_available":false}}}`,
		`{"message":{"id":"msg_1","sender":"agent","text":""}}`, `{"message":{"id":"a/b","sender":"agent","text":"x"}}`,
		`{"message":{"id":"msg_1","sender":"bot","text":"x"}}`, `{"message":{"id":"msg_1","sender":"agent","context":[]}}`,
		`{"message":{"id":"msg_1","sender":"agent","data":null,"text":1}}`, `{"message":[]}`, `[]`, `{}`, ``, `{"message":{}} x`,
	} {
		f.Add([]byte(seed), true)
		f.Add([]byte(seed), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, start bool) {
		in, e := parseMessageRequest(body, start)
		if (in == nil) == (e == nil) {
			t.Fatalf("parseMessageRequest(%q) = %v, %v: want exactly one", body, in, e)
		}
		if e != nil {
			if convErrorStatus[e.code] == 0 || e.status != convErrorStatus[e.code] {
				t.Fatalf("error %q with status %d", e.code, e.status)
			}
			return
		}
		m := in.msg
		switch {
		case !idPattern.MatchString(m.ID):
			t.Fatalf("accepted message ID %q", m.ID)
		case m.Sender != "agent" && m.Sender != "human":
			t.Fatalf("accepted sender %q", m.Sender)
		case m.Text == "" && m.Data == nil && m.Context == nil:
			t.Fatalf("accepted a message with none of text, data and context")
		case !json.Valid([]byte(in.canonical)):
			t.Fatalf("canonical form %q is not JSON", in.canonical)
		case in.hasParent && (!start || !idPattern.MatchString(in.parentID)):
			t.Fatalf("accepted parent %q (start %v)", in.parentID, start)
		}
		// The canonical form is stable: parsing it again gives itself.
		again, e := parseMessageRequest([]byte(`{"message":`+in.canonical+`}`), true)
		if e != nil || again.canonical != in.canonical {
			t.Fatalf("canonical form %q parses to %v, %v", in.canonical, again, e)
		}
	})
}

func FuzzReadQuery(f *testing.F) {
	for _, seed := range []string{"cursor=evt_c1&wait=30", "wait=0.5", "wait=-1", "wait=NaN", "wait=1e400", "wait=Inf",
		"cursor=", "cursor=a&cursor=b", "cursor=%2F", "wait=10&wait=20", "", "cursor=evt_" + strings.Repeat("a", 300)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r, err := http.NewRequest(http.MethodGet, "https://api.example.com/poppy/conversations/cnv_1/events?"+rawQuery, nil)
		if err != nil {
			return
		}
		q, e := parseReadQuery(r)
		if e != nil {
			return
		}
		if q.wait < 0 || q.wait > maxWait || (q.hasCursor && !idPattern.MatchString(q.cursor)) {
			t.Fatalf("parseReadQuery(%q) = %+v", rawQuery, q)
		}
	})
}

func FuzzTextPieces(f *testing.F) {
	for _, seed := range []string{"I can do that. The insulated version would be warmer.", "", " ", "a", "ab cd", "   x   ", "née çà ü"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ev := Event{Type: "message", Message: &Message{ID: "msg_1", Role: "company", Text: text}}
		pieces := textPieces(ev)
		if strings.Join(pieces, "") != text || len(pieces) > 3 {
			t.Fatalf("textPieces(%q) = %q", text, pieces)
		}
		for _, p := range pieces {
			if p == "" {
				t.Fatalf("textPieces(%q) has an empty piece: %q", text, pieces)
			}
		}
	})
}

func TestMatchRule(t *testing.T) {
	for text, want := range map[string]string{
		"Where is my order?":                             "order_status",
		"Could a specialist look at it?":                 "user_requested",
		"Please talk to the user.":                       "user_requested",
		"The user wants to talk to a human":              "handoff",
		"My Personal Agent says hello":                   "",
		"Return order #1042, please":                     "return",
		"I'd like a refund":                              "return",
		"Exchange the jacket for stormline-insulated-m.": "exchange",
		"PERSON": "handoff",
		"Does the insulated version come in medium?": "",
	} {
		if got := matchRule(text); got != want {
			t.Errorf("matchRule(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestOrderAndSKUIn(t *testing.T) {
	for _, tc := range []struct{ data, text, want string }{
		{"", "order #1042 is late", "ord_1042"},
		{"", "about ord_2001", "ord_2001"},
		{"", "order 1043.", "ord_1043"},
		{"ord_9", "order 1042", "ord_9"},
		{"", "my order", ""},
		{"", "order 10423", ""},
	} {
		if got := orderIn(tc.data, tc.text); got != tc.want {
			t.Errorf("orderIn(%q, %q) = %q, want %q", tc.data, tc.text, got, tc.want)
		}
	}
	if got := skuIn("", "for the STORMLINE-INSULATED-M please"); got != "stormline-insulated-m" {
		t.Errorf("skuIn = %q", got)
	}
	if got := skuIn("x", "stormline-l"); got != "x" {
		t.Errorf("skuIn with data = %q", got)
	}
}
