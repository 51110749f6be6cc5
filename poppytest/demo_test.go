package poppytest_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// readUntil reads id's events from cursor, waiting, until done holds for
// the events read so far, and returns them with the last answer.
func (a *convAgent) readUntil(id, cursor string, done func([]map[string]any) bool) ([]map[string]any, response) {
	a.t.Helper()
	var all []map[string]any
	for range 20 {
		r := a.read(id, url.Values{"wait": {"5"}, "cursor": {cursor}}.Encode())
		if r.status != 200 {
			a.t.Fatalf("read %s: %d %v", id, r.status, r.body)
		}
		all, cursor = append(all, events(r)...), r.str("cursor")
		if done(all) {
			return all, r
		}
	}
	a.t.Fatalf("conversation %s: the events awaited never came: %v", id, all)
	return nil, response{}
}

// humanSaid reports whether evs hold a message with text from a person.
func humanSaid(text string) func([]map[string]any) bool {
	return func(evs []map[string]any) bool {
		return slices.ContainsFunc(ofType(evs, "message"), func(e map[string]any) bool {
			m := e["message"].(map[string]any)
			return m["sender"] == "human" && strings.Contains(m["text"].(string), text)
		})
	}
}

// TestHumanJoins: with Options.HumanJoins a person joins a queued handoff
// by itself (a state event with responder human, then their greeting, sender
// human) and answers the agent's next message; the Company Agent stays quiet.
// Without it, a handoff stays queued (TestNoHumans covers NoHumans).
func TestHumanJoins(t *testing.T) {
	s, rt, a, id, cursor := newSettled(t, &poppytest.Options{
		HumanJoins: &poppytest.HumanJoin{After: -1, Greeting: "Hi, Alex here.", Reply: "Noted, thanks."}})
	wantStatus(t, a.request("POST", "/"+id+"/handoff", "", map[string]any{}, nil), 202, poppytest.StatusQueued, poppytest.ResponderAgent)
	evs, last := a.readUntil(id, cursor, humanSaid("Hi, Alex here."))
	wantStatus(t, last, 200, poppytest.StatusIdle, poppytest.ResponderHuman)
	if !slices.ContainsFunc(ofType(evs, "state"), func(e map[string]any) bool { return e["responder"] == "human" }) {
		t.Errorf("no state event says a person joined: %v", evs)
	}
	if r := a.send(id, msg("Can you check order 1042?"), ""); r.status != 202 {
		t.Fatalf("send: %d %v", r.status, r.body)
	}
	evs, _ = a.readUntil(id, last.str("cursor"), humanSaid("Noted, thanks."))
	for _, text := range companyTexts(evs) {
		if strings.Contains(text, "1042") {
			t.Errorf("the Company Agent answered while a person was there: %q", text)
		}
	}
	wantNoViolation(t, s, rt)
}

// TestInboxShowsCodes: InboxHandler lists each one-time code Mediated
// Sign-In sent, with its account and where it went, waiting until used,
// on a page no cache keeps.
func TestInboxShowsCodes(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	page := func() (string, http.Header) {
		w := httptest.NewRecorder()
		s.InboxHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/demo/inbox", nil))
		return w.Body.String(), w.Header()
	}
	if body, _ := page(); !strings.Contains(body, `id="empty"`) {
		t.Errorf("an inbox before any code: %s", body)
	}
	tok := a.startSession().str("access_token")
	r := a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42"))
	code := s.LastCode(r.str("sign_in_id"))
	body, h := page()
	for _, want := range []string{code, "sam@example.com", "Text to the phone number ending in 71", "waiting"} {
		if code == "" || !strings.Contains(body, want) {
			t.Errorf("the inbox lacks %q:\n%s", want, body)
		}
	}
	if h.Get("Cache-Control") != "no-store" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("headers %v", h)
	}
	if r := a.submitCode(tok, r.str("sign_in_id"), code); r.str("status") != "complete" {
		t.Fatalf("submitting the code: %d %v", r.status, r.body)
	}
	if body, _ := page(); !strings.Contains(body, "finished") || strings.Contains(body, "waiting") {
		t.Errorf("a used code is still waiting:\n%s", body)
	}
	w := httptest.NewRecorder()
	s.InboxHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/demo/inbox", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST to the inbox: %d", w.Code)
	}
	wantNoViolation(t, s, rt)
}
