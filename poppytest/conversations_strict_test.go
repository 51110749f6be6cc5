package poppytest_test

// Tests of the knobs that make the reference Company as strict as Poppy 0.1
// §7 lets a Company be: replayed events, a role for the agent's own
// messages that the spec does not define, and bodies of handoff and close
// that must be {}. Each proves the knob works, and that an agent doing the
// wrong thing fails against it.

import (
	"net/http"
	"slices"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// transcript is what an agent that handles every event it reads would
// show, and what one that skips the IDs it has handled (§7.5) would.
func transcript(reads ...[]map[string]any) (naive, deduped []string) {
	seen := map[string]bool{}
	for _, evs := range reads {
		for _, e := range evs {
			id := e["id"].(string)
			naive = append(naive, id)
			if !seen[id] {
				seen[id] = true
				deduped = append(deduped, id)
			}
		}
	}
	return naive, deduped
}

// TestReplayEvents: by default a read after a cursor returns the cursor's
// event again beside the new ones, over JSON and in a stream resumed with
// Last-Event-ID, so an agent that does not skip handled events shows one
// twice; a held read with nothing new still waits and returns nothing.
func TestReplayEvents(t *testing.T) {
	s, rt, raw, c := newTestCompany(t, &poppytest.Options{AgentDelay: -1}) // ReplayEvents zero: the default
	a := &convAgent{rawAgent: raw, clock: c}
	a.newSession()
	id := a.mustStart("hello")
	first, last := a.settle(id, "")
	cursor := last.str("cursor")
	if r := a.read(id, "wait=0.1&cursor="+cursor); len(events(r)) != 0 {
		t.Errorf("a read with nothing new returned %v", events(r))
	}
	if err := s.Person(id).Join(); err != nil {
		t.Fatal(err)
	}
	next := events(a.read(id, "cursor="+cursor))
	if len(next) != 2 || next[0]["id"] != cursor {
		t.Fatalf("read after %s: %v, want it again and the new state event", cursor, next)
	}
	naive, deduped := transcript(first, next)
	if len(naive) == len(deduped) {
		t.Errorf("no event came twice: %v", naive)
	}
	if !slices.Equal(deduped, eventIDs(s.Events(id))) {
		t.Errorf("deduplicated %v, want every event once %v", deduped, eventIDs(s.Events(id)))
	}

	st := a.openStream(id, "", http.Header{"Last-Event-Id": {cursor}})
	if got := eventFrames(t, st.next(t, 2)); got[0]["id"] != cursor || got[1]["id"] != next[1]["id"] {
		t.Errorf("resumed stream %v, want %s again, then %s", got, cursor, next[1]["id"])
	}
	wantNoViolation(t, s, rt)
}

// TestReplayEventsOff: ReplayEvents negative returns each event once.
func TestReplayEventsOff(t *testing.T) {
	s, rt, a, id, cursor := newSettled(t, &poppytest.Options{ReplayEvents: -1})
	if err := s.Person(id).Join(); err != nil {
		t.Fatal(err)
	}
	if evs := events(a.read(id, "cursor="+cursor)); len(evs) != 1 || evs[0]["id"] == cursor {
		t.Errorf("read %v, want only the new event", evs)
	}
	wantNoViolation(t, s, rt)
}

// TestAgentRole: the agent's own messages carry a role the spec does not
// define, "personal_agent" by default or the knob's, never "agent": an
// agent that finds its own messages by role "agent" takes them for
// someone else's.
func TestAgentRole(t *testing.T) {
	for _, c := range []struct{ knob, want string }{{"", "personal_agent"}, {"user", "user"}} {
		s, rt, a, id, _ := newSettled(t, &poppytest.Options{AgentRole: c.knob})
		evs, _ := a.settle(id, "")
		var mine, byRole []string
		for _, e := range ofType(evs, "message") {
			m := e["message"].(map[string]any)
			if m["role"] != "company" {
				mine = append(mine, m["role"].(string))
			}
			if m["role"] == "agent" { // the wrong way to find the agent's own
				byRole = append(byRole, m["id"].(string))
			}
		}
		if !slices.Equal(mine, []string{c.want}) {
			t.Errorf("AgentRole %q: the agent's messages have roles %v, want [%s]", c.knob, mine, c.want)
		}
		if len(byRole) != 0 {
			t.Errorf("AgentRole %q: an agent matching role \"agent\" found its messages", c.knob)
		}
		wantNoViolation(t, s, rt)
	}
}

// TestControlBodiesEmpty: handoff and close take only {} (Poppy 0.1 §7.9:
// "with an empty JSON object"; §7.12: "sending an empty JSON object"): an
// agent that sends fields is answered 400 and reported, and nothing is done.
func TestControlBodiesEmpty(t *testing.T) {
	for _, c := range []struct{ path, section string }{{"/handoff", "§7.9"}, {"/close", "§7.12"}} {
		s, rt, a := newConvCompany(t, nil)
		id := a.mustStart("hello")
		wantConvError(t, a.request("POST", "/"+id+c.path, "", map[string]any{"reason": "the user asked"}, nil), 400, "invalid_request")
		wantViolation(t, s, rt, c.section, "not the empty JSON object")
		if cv, _ := s.Conversation(id); cv.Status != poppytest.StatusIdle && cv.Status != poppytest.StatusWorking {
			t.Errorf("%s with fields was acted on: status %s", c.path, cv.Status)
		}
	}
}

func eventIDs(evs []poppytest.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// TestEndlessHasMore: every read adds news and says has_more, so an agent
// that reads again while has_more, without a limit of its own, never stops.
func TestEndlessHasMore(t *testing.T) {
	s, rt, a := newConvCompany(t, &poppytest.Options{EndlessHasMore: true, AgentDelay: -1})
	id, cursor := a.mustStart("hello"), ""
	for range 5 {
		q := ""
		if cursor != "" {
			q = "cursor=" + cursor
		}
		r := a.read(id, q)
		if r.body["has_more"] != true || len(events(r)) == 0 {
			t.Fatalf("read %v, want news and has_more", r.body)
		}
		cursor = r.str("cursor")
	}
	wantNoViolation(t, s, rt)
}

// TestFloodDeltas: the next stream starts with pieces of messages that
// never come whole, each of its own, then goes on as usual.
func TestFloodDeltas(t *testing.T) {
	s, rt, a, id, _ := newSettled(t, nil)
	s.FloodDeltas(50)
	frames := a.openStream(id, "", nil).next(t, 51)
	ids := map[string]bool{}
	for _, f := range frames[:50] {
		if f.event != "text-delta" || f.hasID {
			t.Fatalf("frame %+v, want a text-delta without id", f)
		}
		ids[f.data] = true
	}
	if len(ids) != 50 || frames[50].event != "" || !frames[50].hasID {
		t.Errorf("%d distinct pieces, then %+v; want 50 and an event", len(ids), frames[50])
	}
	wantNoViolation(t, s, rt)
}
