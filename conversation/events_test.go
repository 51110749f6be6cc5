package conversation

import "testing"

// TestEventTypes: every event type of Poppy 0.1 has a row of the table and
// is read with the fields it needs, and kept as malformed (so skipped)
// without them; a type of no row is read, not known, and skipped.
func TestEventTypes(t *testing.T) {
	for _, c := range []struct{ typ, fields string }{
		{EventMessage, `"message":{"id":"m1","text":"hi"}`},
		{EventState, `"status":"idle","responder":"agent"`},
		{EventAuthorization, `"error":"sign_in_required"`},
		{EventUserRequested, `"reason":"a person wants to talk"`},
		{EventDirectOpened, `"conversation_id":"c2"`},
		{EventDirectClosed, `"conversation_id":"c2"`},
	} {
		ev, err := parseEvent([]byte(`{"id":"e1","type":"` + c.typ + `","created_at":"2026-01-02T03:04:05Z",` + c.fields + `}`))
		if err != nil || ev.Type != c.typ || !ev.Known() {
			t.Errorf("%s with its fields: %+v, %v; want it read and known", c.typ, ev, err)
		}
		if c.typ == EventUserRequested {
			continue // needs no field
		}
		ev, err = parseEvent([]byte(`{"id":"e1","type":"` + c.typ + `"}`))
		if err != nil || ev.Type != "malformed "+c.typ || ev.Known() {
			t.Errorf("%s without its fields: %+v, %v; want it malformed, not known", c.typ, ev, err)
		}
	}
	ev, err := parseEvent([]byte(`{"id":"e1","type":"later_type"}`))
	if err != nil || ev.Known() {
		t.Errorf("an unknown type: %+v, %v; want it read and not known", ev, err)
	}
}
