package democompany_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/democompany"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// readUntil reads id's events from cursor, waiting, until done holds for
// the events read so far, and returns them with the last page.
func readUntil(t *testing.T, c *conversation.Client, id, cursor string, done func([]conversation.Event) bool) ([]conversation.Event, *conversation.Page) {
	t.Helper()
	var all []conversation.Event
	for range 20 {
		p, err := c.Read(context.Background(), id, cursor, 5*time.Second)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		all, cursor = append(all, p.Events...), p.Cursor
		if done(all) {
			return all, p
		}
	}
	t.Fatalf("conversation %s: the events awaited never came: %+v", id, all)
	return nil, nil
}

// humanSaid reports whether evs hold a message with text from a person.
func humanSaid(text string) func([]conversation.Event) bool {
	return func(evs []conversation.Event) bool {
		return slices.ContainsFunc(evs, func(e conversation.Event) bool {
			return e.Type == conversation.EventMessage && e.Message.Sender == conversation.SenderHuman &&
				strings.Contains(e.Message.Text, text)
		})
	}
}

// TestHumanJoins: with a HumanJoin watching, a person joins a queued handoff
// by themself (a state event with responder human, then their greeting,
// sender human) and answers the agent's next message; the Company Agent
// stays quiet. Without one, a handoff stays queued (poppytest's
// TestNoHumans covers NoHumans).
func TestHumanJoins(t *testing.T) {
	h := &democompany.HumanJoin{After: -1, Greeting: "Hi, Alex here.", Reply: "Noted, thanks."}
	srv := poppytest.NewServer(t, &poppytest.Options{AgentDelay: -1, OnEvent: h.Watch})
	h.Attend(srv)
	c := newAgent(t, srv).conversations(t)
	ctx := context.Background()
	p, err := c.Start(ctx, conversation.Message{ID: conversation.NewMessageID(), Sender: conversation.SenderAgent, Text: "Hello"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := p.ConversationID
	if st, err := c.Handoff(ctx, id); err != nil || st.Status != conversation.StatusQueued {
		t.Fatalf("handoff: %+v %v", st, err)
	}
	evs, last := readUntil(t, c, id, "", humanSaid("Hi, Alex here."))
	if !slices.ContainsFunc(evs, func(e conversation.Event) bool {
		return e.Type == conversation.EventState && e.Responder == conversation.ResponderHuman
	}) {
		t.Errorf("no state event says a person joined: %+v", evs)
	}
	if _, err := c.Send(ctx, id, conversation.Message{ID: conversation.NewMessageID(), Sender: conversation.SenderAgent, Text: "Can you check order 1042?"}, nil); err != nil {
		t.Fatal(err)
	}
	evs, _ = readUntil(t, c, id, last.Cursor, humanSaid("Noted, thanks."))
	for _, e := range evs {
		if e.Type == conversation.EventMessage && e.Message.Role == conversation.RoleCompany &&
			e.Message.Sender != conversation.SenderHuman && strings.Contains(e.Message.Text, "1042") {
			t.Errorf("the Company Agent answered while a person was there: %q", e.Message.Text)
		}
	}
	if cv, _ := srv.Conversation(id); cv.Status != poppytest.StatusIdle || cv.Responder != poppytest.ResponderHuman {
		t.Errorf("after the person joined: %s, %s", cv.Status, cv.Responder)
	}
	wantNoViolation(t, srv)
}
