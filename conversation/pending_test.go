package conversation

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// dyingTracker is a Tracker whose Client never retries: a process that
// stops right after a failed attempt.
func (co *company) dyingTracker(t *testing.T, opts *TrackerOptions) *Tracker {
	t.Helper()
	c, err := New(co.sess.Client(), co.endpoint(), &Options{NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracker(c, co.st, co.owner(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// texts are the texts of the agent's messages the Company recorded.
func (co *company) texts(conversationID string) []string {
	var out []string
	for _, m := range co.srv.Messages(conversationID) {
		out = append(out, m.Text)
	}
	return out
}

// limited makes the Company refuse the next request to path with 429 and
// a hold of a second: the message does not reach it, and a caller that
// cannot wait the second out stops with the message pending.
func (co *company) limited(t *testing.T, path string) {
	t.Helper()
	co.srv.RateLimit("api."+co.srv.Domain(), path, 1, time.Second)
}

// hurried is a context too short to wait a Retry-After of a second out.
func hurried(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// afterHold waits for the Company's hold of a second to pass.
func afterHold() { time.Sleep(1100 * time.Millisecond) }

// leftPending starts a conversation with "Hello" and leaves text pending in
// it: its send, by a tracker that then dies, meets a rate limit the call
// cannot wait out. The hold has not passed yet.
func leftPending(t *testing.T, co *company, text string) *Update {
	t.Helper()
	u := started(t, co.tracker(t), "Hello")
	co.limited(t, "/poppy/conversations/"+u.ConversationID+"/messages")
	if _, err := co.dyingTracker(t, nil).Send(hurried(t), u.ConversationID, textMsg(text), nil); err == nil {
		t.Fatal("the limited send succeeded")
	}
	return u
}

// TestPendingSameContent: a message whose answer was lost (the Company
// accepted it, the process stopped) keeps its ID when the same content is
// sent again by another Tracker on the same store, and the Company has it
// once; it is not also sent again on its own.
func TestPendingSameContent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		ctx := context.Background()
		u := started(t, co.tracker(t), "Hello")
		co.srv.DropConnectionAfterAccept(1)
		_, err := co.dyingTracker(t, nil).Send(ctx, u.ConversationID, textMsg("Please check order 1042"), nil)
		var ue *UndeliveredError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want *UndeliveredError", err)
		}
		again, err := co.tracker(t).Send(ctx, u.ConversationID, textMsg("Please check order 1042"), nil)
		if err != nil || again.MessageID != ue.MessageID || len(again.Resent) != 0 {
			t.Fatalf("sent again: %+v, %v; want ID %s and nothing else resent", again, err, ue.MessageID)
		}
		if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello", "Please check order 1042"}) {
			t.Errorf("the Company recorded %q", got)
		}
		fresh, err := co.tracker(t).Send(ctx, u.ConversationID, textMsg("Please check order 1042"), nil)
		if err != nil || fresh.MessageID == ue.MessageID {
			t.Errorf("a delivered message's ID was reused: %v, %s", err, fresh.MessageID)
		}
	})
}

// TestPendingResentOnNextCall: a message that never reached the Company
// (the process stopped after a refused attempt) is sent by the next call of
// another Tracker on the same store, whatever the call, with its original
// ID, and reported; the Company has it exactly once, and later calls do
// not send it again. On the old code it was sent only if the same text was
// sent again.
func TestPendingResentOnNextCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		ctx := context.Background()
		u := leftPending(t, co, "Yes, the medium one")
		if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello"}) {
			t.Fatalf("the Company recorded %q before the resend", got)
		}
		afterHold()
		r, err := co.tracker(t).Read(ctx, u.ConversationID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Resent) != 1 || r.Resent[0].Outcome != ResentDelivered || r.Resent[0].Text != "Yes, the medium one" ||
			r.Resent[0].ConversationID != u.ConversationID {
			t.Fatalf("resent %+v, want the pending message delivered", r.Resent)
		}
		msgs := co.srv.Messages(u.ConversationID)
		if len(msgs) != 2 || msgs[1].ID != r.Resent[0].MessageID {
			t.Errorf("the Company has %+v, want the pending message once, with its ID %s", msgs, r.Resent[0].MessageID)
		}
		again, err := co.tracker(t).Read(ctx, u.ConversationID, nil)
		if err != nil || len(again.Resent) != 0 || len(co.srv.Messages(u.ConversationID)) != 2 {
			t.Errorf("a second call: %+v, %v; the Company has %d messages", again, err, len(co.srv.Messages(u.ConversationID)))
		}
	})
}

// TestPendingStartResent: a conversation's first message, pending, is sent
// by the next call at the same Company (here another conversation's
// start): the conversation it starts is recorded and reported.
func TestPendingStartResent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		ctx := context.Background()
		co.limited(t, "/poppy/conversations")
		if _, err := co.dyingTracker(t, nil).Start(hurried(t), textMsg("Is the jacket in stock?"), "", nil); err == nil {
			t.Fatal("the limited start succeeded")
		}
		afterHold()
		u, err := co.tracker(t).Start(ctx, textMsg("Another question"), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Resent) != 1 || u.Resent[0].Outcome != ResentDelivered || u.Resent[0].ConversationID == "" {
			t.Fatalf("resent %+v", u.Resent)
		}
		first := u.Resent[0].ConversationID
		if got := co.texts(first); !slices.Equal(got, []string{"Is the jacket in stock?"}) || len(co.srv.Conversations()) != 2 {
			t.Errorf("the pending start's conversation has %q; %d conversations", got, len(co.srv.Conversations()))
		}
		if _, err := co.st.Conversation(ctx, co.ac.Issuer, first); err != nil {
			t.Errorf("the conversation the pending start began is not recorded: %v", err)
		}
	})
}

// TestPendingExpired: a pending message older than PendingMaxAge is
// reported not sent and never sent: a "yes, pay" must not arrive late.
func TestPendingExpired(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		var mu sync.Mutex
		now := time.Now()
		clock := &TrackerOptions{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
		ctx := context.Background()
		u := started(t, co.trackerWith(t, clock), "Hello")
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		co.limited(t, path)
		if _, err := co.dyingTracker(t, clock).Send(hurried(t), u.ConversationID, textMsg("Yes, pay"), nil); err == nil {
			t.Fatal("the limited send succeeded")
		}
		afterHold()
		mu.Lock()
		now = now.Add(11 * time.Minute)
		mu.Unlock()
		posts := co.srv.Count("api."+co.srv.Domain(), path)
		r, err := co.trackerWith(t, clock).Read(ctx, u.ConversationID, nil)
		if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentExpired || r.Resent[0].Text != "Yes, pay" {
			t.Fatalf("read: %+v, %v; want the message reported expired", r, err)
		}
		if _, err := co.trackerWith(t, clock).Send(ctx, u.ConversationID, textMsg("Something else"), nil); err != nil {
			t.Fatal(err)
		}
		if n := co.srv.Count("api."+co.srv.Domain(), path) - posts; n != 1 || slices.Contains(co.texts(u.ConversationID), "Yes, pay") {
			t.Errorf("%d POSTs after it expired (want 1, the new message); the Company has %q", n, co.texts(u.ConversationID))
		}
	})
}

// TestPendingConflict: a pending message whose ID the Company holds with
// other content gets message_id_conflict: reported refused, never sent
// again. (poppytest counts the reused ID as the agent's violation, which
// this test makes on purpose.)
func TestPendingConflict(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt := &recordingT{T: t}
		co := newBubbleCompany(t, rt, nil)
		ctx := context.Background()
		u := started(t, co.tracker(t), "Hello")
		if _, err := co.tracker(t).Send(ctx, u.ConversationID, Message{ID: "msg_reused", Sender: SenderAgent, Text: "First"}, nil); err != nil {
			t.Fatal(err)
		}
		path := "/poppy/conversations/" + u.ConversationID + "/messages"
		co.limited(t, path)
		_, err := co.dyingTracker(t, nil).Send(hurried(t), u.ConversationID, Message{ID: "msg_reused", Sender: SenderAgent, Text: "Second"}, nil)
		if err == nil {
			t.Fatal("the limited send succeeded")
		}
		afterHold()
		r, err := co.tracker(t).Read(ctx, u.ConversationID, nil)
		if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentRefused || !errors.Is(r.Resent[0].Err, ErrMessageIDConflict) {
			t.Fatalf("read: %+v, %v; want the message refused with message_id_conflict", r.Resent, err)
		}
		posts := co.srv.Count("api."+co.srv.Domain(), path)
		if again, err := co.tracker(t).Read(ctx, u.ConversationID, nil); err != nil || len(again.Resent) != 0 ||
			co.srv.Count("api."+co.srv.Domain(), path) != posts {
			t.Errorf("sent again after a conflict: %+v, %v", again, err)
		}
	})
}

// TestResentOnFailure: what became of pending messages is said even when
// the call itself fails.
func TestResentOnFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil)
		ctx := context.Background()
		leftPending(t, co, "Medium")
		afterHold()
		_, err := co.tracker(t).Read(ctx, "cnv_unknown", nil)
		var re *ResentError
		if !errors.As(err, &re) || !errors.Is(err, ErrConversationNotFound) || len(re.Resent) != 1 || re.Resent[0].Outcome != ResentDelivered {
			t.Errorf("err = %v, want conversation_not_found carrying the delivered resend", err)
		}
	})
}
