package conversation

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// types returns the types of events.
func types(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// TestHandoff: queued while the Company finds someone, responder agent
// meanwhile; then a person joins and writes as human (Poppy 0.1 §7.7, §7.9).
func TestHandoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		tr := co.tracker(t)
		ctx := context.Background()
		u := started(t, tr, "Hello")
		h, err := tr.Handoff(ctx, u.ConversationID)
		if err != nil || h.Status != StatusQueued || h.Responder != ResponderAgent {
			t.Fatalf("handoff: %+v, %v", h, err)
		}
		rec, _ := co.st.Conversation(ctx, co.ac.Issuer, u.ConversationID)
		if rec.Status != StatusQueued {
			t.Errorf("stored status %q", rec.Status)
		}
		person := co.srv.Person(u.ConversationID)
		go func() {
			time.Sleep(50 * time.Millisecond)
			person.Join()
			person.Say("Hi, I'm Alex. How can I help?")
		}()
		r, err := tr.Read(ctx, u.ConversationID, &ReadOptions{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for len(companyTexts(r.Events)) == 0 && err == nil { // the person may not have spoken yet
			var more *Update
			more, err = tr.Read(ctx, u.ConversationID, &ReadOptions{Wait: 5 * time.Second})
			r.Events, r.State = append(r.Events, more.Events...), more.State
		}
		last := r.Events[len(r.Events)-1]
		if r.Responder != ResponderHuman || last.Message == nil || last.Message.Sender != SenderHuman || last.Message.Role != RoleCompany {
			t.Errorf("after the person joined: %+v, last %+v", r.State, last.Message)
		}
	})
}

// TestHandoffNoOne: no one is available; back to idle with the agent, and
// the Company Agent says why.
func TestHandoffNoOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, &poppytest.Options{NoHumans: true})
		tr := co.tracker(t)
		ctx := context.Background()
		u := started(t, tr, "Hello")
		if _, err := tr.Handoff(ctx, u.ConversationID); err != nil {
			t.Fatal(err)
		}
		r, err := tr.Read(ctx, u.ConversationID, &ReadOptions{Wait: 5 * time.Second})
		if err != nil || r.Status != StatusIdle || r.Responder != ResponderAgent || len(companyTexts(r.Events)) != 1 {
			t.Errorf("%+v (%v), %v", r, types(r.Events), err)
		}
	})
}

// TestDirectConversation: the User talks with the Company in a Direct
// Conversation; the parent takes no messages meanwhile and says where the
// User is; closing the Direct Conversation reopens the parent (§7.10).
func TestDirectConversation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		tr := co.tracker(t)
		ctx := context.Background()
		parent := started(t, tr, "Please have a specialist confirm the exchange")
		if !slices.Contains(types(parent.Events), EventUserRequested) {
			t.Errorf("no user_requested in %v", types(parent.Events))
		}
		direct, err := tr.Start(ctx, Message{Sender: SenderHuman, Text: "Hi, I have a question about the exchange."},
			parent.ConversationID, &ReadOptions{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if direct.ConversationID == parent.ConversationID || direct.ParentID != parent.ConversationID || len(companyTexts(direct.Events)) == 0 {
			t.Errorf("direct: %+v", direct)
		}
		pr, err := tr.Read(ctx, parent.ConversationID, nil)
		if err != nil || len(pr.Events) == 0 || pr.Events[0].Type != EventDirectOpened || pr.Events[0].ConversationID != direct.ConversationID {
			t.Fatalf("parent after opening: %+v, %v", pr, err)
		}
		_, err = tr.Send(ctx, parent.ConversationID, textMsg("Anything else?"), nil)
		var ce *Error
		if !errors.Is(err, ErrDirectConversationOpen) || !errors.As(err, &ce) || ce.ConversationID != direct.ConversationID {
			t.Errorf("message to the parent: %v", err)
		}
		if _, err := tr.Handoff(ctx, parent.ConversationID); !errors.Is(err, ErrDirectConversationOpen) {
			t.Errorf("handoff of the parent: %v", err)
		}
		_, err = tr.Start(ctx, Message{Sender: SenderHuman, Text: "again"}, parent.ConversationID, nil)
		if !errors.Is(err, ErrDirectConversationOpen) {
			t.Errorf("a second Direct Conversation: %v", err)
		}
		if _, err := tr.Close(ctx, direct.ConversationID); err != nil {
			t.Fatal(err)
		}
		pr, err = tr.Read(ctx, parent.ConversationID, nil)
		if err != nil || !slices.Contains(types(pr.Events), EventDirectClosed) {
			t.Errorf("parent after closing: %v, %v", types(pr.Events), err)
		}
		if _, err := tr.Send(ctx, parent.ConversationID, textMsg("Back to you"), nil); err != nil {
			t.Errorf("the parent takes messages again: %v", err)
		}
		if _, err := tr.Start(ctx, Message{Sender: SenderHuman, Text: "x"}, "cnv_nonexistent", nil); !errors.Is(err, ErrConversationNotFound) {
			t.Errorf("a Direct Conversation of an unknown parent: %v", err)
		}
	})
}

// TestClose: a closed conversation takes no message and stays readable;
// closing the parent closes its Direct Conversation in the store too.
func TestClose(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		tr := co.tracker(t)
		ctx := context.Background()
		parent := started(t, tr, "Hello")
		direct, err := tr.Start(ctx, Message{Sender: SenderHuman, Text: "Hi"}, parent.ConversationID, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tr.Close(ctx, parent.ConversationID)
		if err != nil || c.Status != StatusClosed {
			t.Fatalf("close: %+v, %v", c, err)
		}
		for _, id := range []string{parent.ConversationID, direct.ConversationID} {
			rec, _ := co.st.Conversation(ctx, co.ac.Issuer, id)
			if !rec.Closed || rec.Status != StatusClosed {
				t.Errorf("%s stored as %+v", id, rec)
			}
		}
		if _, err := tr.Send(ctx, parent.ConversationID, textMsg("one more"), nil); !errors.Is(err, ErrConversationClosed) {
			t.Errorf("send after close: %v", err)
		}
		if r, err := tr.Read(ctx, parent.ConversationID, nil); err != nil || r.Status != StatusClosed {
			t.Errorf("read after close: %+v, %v", r, err)
		}
		if again, err := tr.Close(ctx, parent.ConversationID); err != nil || again.Status != StatusClosed {
			t.Errorf("closing twice: %+v, %v", again, err)
		}
	})
}

// TestCompanyClosesAndAsks: the Company's own close arrives as a state
// event; a user_requested event carries its reason.
func TestCompanyClosesAndAsks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		tr := co.tracker(t)
		ctx := context.Background()
		u := started(t, tr, "Hello")
		if err := co.srv.RequestUser(u.ConversationID, "A specialist needs to confirm the exchange with the customer."); err != nil {
			t.Fatal(err)
		}
		if err := co.srv.CloseConversation(u.ConversationID); err != nil {
			t.Fatal(err)
		}
		r, err := tr.Read(ctx, u.ConversationID, nil)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(r.Events, func(e Event) bool { return e.Type == EventUserRequested })
		if i < 0 || r.Events[i].Reason == "" || r.Status != StatusClosed {
			t.Errorf("%+v", r)
		}
		rec, _ := co.st.Conversation(ctx, co.ac.Issuer, u.ConversationID)
		if !rec.Closed {
			t.Error("not stored as closed")
		}
	})
}

// TestAuthorizationEvent: an account question from a signed-out Session
// gets an authorization event naming the scope (Poppy 0.1 §7.11).
func TestAuthorizationEvent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		tr := co.tracker(t)
		u, err := tr.Start(context.Background(), textMsg("What is the status of order 1042?"), "", &ReadOptions{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(u.Events, func(e Event) bool { return e.Type == EventAuthorization })
		if i < 0 || u.Events[i].Error != "sign_in_required" || u.Events[i].Scope != "poppy:read" {
			t.Errorf("events %v", types(u.Events))
		}
	})
}
