package conversation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

func TestChooseEndpoint(t *testing.T) {
	got, err := ChooseEndpoint([]discovery.Protocol{
		{Type: "a2a", Endpoint: "https://api.example.com/a2a"},
		{Type: "poppy", Endpoint: "https://api.example.com/poppy/conversations"},
		{Type: "poppy", Endpoint: "https://api.example.com/second"},
	})
	if err != nil || got != "https://api.example.com/poppy/conversations" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := ChooseEndpoint([]discovery.Protocol{{Type: "a2a", Endpoint: "https://x"}}); !errors.Is(err, ErrNoProtocol) {
		t.Errorf("no poppy entry: %v", err)
	}
}

func TestNewMessageID(t *testing.T) {
	a, b := NewMessageID(), NewMessageID()
	if a == b || !strings.HasPrefix(a, "msg_") || !validID(a) || len(a) < 4+22 {
		t.Errorf("IDs %q, %q", a, b)
	}
}

// TestStartRetriedAfterDrop: the Company accepts the first message and the
// connection breaks; the retry with the same ID gets the conversation
// already started, and the Company has one message (Poppy 0.1 §7.3).
func TestStartRetriedAfterDrop(t *testing.T) {
	co := newCompany(t, nil, &poppytest.Options{NoNonce: true}) // counts POSTs: no DPoP nonce retry among them
	co.srv.DropConnectionAfterAccept(1)
	u, err := co.tracker(t).Start(context.Background(), textMsg("Hello"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := co.srv.Count("api."+co.srv.Domain(), "/poppy/conversations"); n != 2 {
		t.Errorf("the Company got %d POSTs, want 2 (the dropped one and its retry)", n)
	}
	convs := co.srv.Conversations()
	msgs := co.srv.Messages(u.ConversationID)
	if len(convs) != 1 || convs[0].ID != u.ConversationID || len(msgs) != 1 || msgs[0].ID != u.MessageID {
		t.Errorf("conversations %d, messages %+v; want one of each with ID %s", len(convs), msgs, u.MessageID)
	}
}

// TestSendRetriedAfter503: a 5xx answer after accepting; the retry is
// recognized, and the message is recorded once.
func TestSendRetriedAfter503(t *testing.T) {
	co := newCompany(t, nil, nil)
	tr := co.tracker(t)
	ctx := context.Background()
	u, err := tr.Start(ctx, textMsg("Hello"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	co.srv.FailNextPost(1)
	u2, err := tr.Send(ctx, u.ConversationID, textMsg("Thanks"), nil)
	if err != nil {
		t.Fatal(err)
	}
	path := "/poppy/conversations/" + u.ConversationID + "/messages"
	if n := co.srv.Count("api."+co.srv.Domain(), path); n != 2 {
		t.Errorf("the Company got %d POSTs, want 2", n)
	}
	msgs := co.srv.Messages(u.ConversationID)
	if len(msgs) != 2 || msgs[1].ID != u2.MessageID || msgs[1].Text != "Thanks" {
		t.Errorf("messages %+v", msgs)
	}
}

// TestMessageIDConflict: the same ID with other content is reported, not
// retried (and poppytest records the agent's violation).
func TestMessageIDConflict(t *testing.T) {
	rt := &recordingT{T: t}
	co := newCompany(t, rt, nil)
	c := co.client(t)
	ctx := context.Background()
	p, err := c.Start(ctx, Message{ID: "msg_same", Sender: SenderAgent, Text: "one"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(ctx, p.ConversationID, Message{ID: "msg_same", Sender: SenderAgent, Text: "two"}, nil)
	var ce *Error
	if !errors.Is(err, ErrMessageIDConflict) || !errors.As(err, &ce) || ce.Status != 409 {
		t.Fatalf("err = %v", err)
	}
	if n := co.srv.Count("api."+co.srv.Domain(), "/poppy/conversations/"+p.ConversationID+"/messages"); n != 1 {
		t.Errorf("%d POSTs of the conflicting message, want 1 (no retry)", n)
	}
	if !strings.Contains(rt.violations(), "message") {
		t.Errorf("poppytest saw no violation: %q", rt.violations())
	}
}

// TestMessageFields: context alone, context kept by the Company across
// messages, the User's own words as human, data; bad messages are refused
// before anything is sent.
func TestMessageFields(t *testing.T) {
	co := newCompany(t, nil, nil)
	tr := co.tracker(t)
	ctx := context.Background()
	yes, no := true, false
	first := Message{Sender: SenderAgent, Text: "Hello", Context: &Context{Locale: "en-US", TimeZone: "America/Los_Angeles",
		UserAvailable: &yes, Other: map[string]json.RawMessage{"units": json.RawMessage(`"metric"`)}}}
	u, err := tr.Start(ctx, first, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Message{
		{Sender: SenderAgent, Context: &Context{UserAvailable: &no}},
		{Sender: SenderHuman, Text: "Medium, please."},
		{Sender: SenderAgent, Data: json.RawMessage(`{"order_id":"ord_1042"}`)},
	} {
		if _, err := tr.Send(ctx, u.ConversationID, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	cv, _ := co.srv.Conversation(u.ConversationID)
	if cv.Context["locale"] != "en-US" || cv.Context["user_available"] != false || cv.Context["units"] != "metric" {
		t.Errorf("the Company's context: %v", cv.Context)
	}
	msgs := co.srv.Messages(u.ConversationID)
	if len(msgs) != 4 || msgs[2].Sender != SenderHuman || msgs[0].Sender != SenderAgent || string(msgs[3].Data) == "" {
		t.Errorf("messages %+v", msgs)
	}
	before := len(co.srv.Requests())
	for _, m := range []Message{
		{Sender: SenderAgent},
		{Sender: SenderAgent, Context: &Context{}},
		{Sender: "robot", Text: "hi"},
		{Sender: SenderAgent, Context: &Context{Locale: "en US"}},
		{Sender: SenderAgent, Context: &Context{TimeZone: "Los Angeles"}},
		{Sender: SenderAgent, Context: &Context{Other: map[string]json.RawMessage{"locale": json.RawMessage(`"x"`)}}},
		{Sender: SenderAgent, Data: json.RawMessage(`{bad`)},
	} {
		if _, err := tr.Send(ctx, u.ConversationID, m, nil); err == nil {
			t.Errorf("%+v was sent", m)
		}
	}
	if n := len(co.srv.Requests()) - before; n != 0 {
		t.Errorf("%d requests for refused messages", n)
	}
}

// TestSessionSwitch: a conversation continues in a new Session, and after
// the Company invalidated the Session Token (the client renews it by
// itself). Poppy 0.1 §7.11: "A conversation isn't tied to one Session Token
// or Session."
func TestSessionSwitch(t *testing.T) {
	co := newCompany(t, nil, nil)
	ctx := context.Background()
	u, err := co.tracker(t).Start(ctx, textMsg("Hello"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	co.srv.ExpireTokens()
	if _, err := co.tracker(t).Send(ctx, u.ConversationID, textMsg("Still there?"), nil); err != nil {
		t.Fatalf("after the token expired: %v", err)
	}
	sess, err := co.agent.StartSession(ctx, co.ac, co.userID)
	if err != nil {
		t.Fatal(err)
	}
	co.sess = sess
	up, err := co.tracker(t).Send(ctx, u.ConversationID, textMsg("New Session here"), &ReadOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("in a new Session: %v", err)
	}
	if len(companyTexts(up.Events)) == 0 {
		t.Errorf("no reply in the new Session: %+v", up)
	}
	if n := len(co.srv.Sessions()); n != 2 {
		t.Errorf("%d Sessions", n)
	}
}

// TestOtherOwner: another User's conversation is not found, and not kept.
// Poppy 0.1 §7.2: "The Company MUST reject requests from any other
// client_id, User, or account." (poppytest counts the attempt as the
// agent's violation, which this test makes on purpose.)
func TestOtherOwner(t *testing.T) {
	rt := &recordingT{T: t}
	co := newCompany(t, rt, nil)
	ctx := context.Background()
	u, err := co.tracker(t).Start(ctx, textMsg("Hello"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := co.agent.StartSession(ctx, co.ac, "usr_someone_else")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := New(sess.Client(), co.endpoint(), nil)
	st2, err := store.Open(ctx, t.TempDir(), &store.Options{Key: bytes.Repeat([]byte{8}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	other, _ := NewTracker(c, st2, Owner{Issuer: co.ac.Issuer, UserID: "usr_someone_else", Domain: co.srv.Domain()}, nil)
	if _, err = other.Read(ctx, u.ConversationID, nil); !errors.Is(err, ErrConversationNotFound) {
		t.Errorf("read as another User: %v", err)
	}
	if _, err := other.Send(ctx, u.ConversationID, textMsg("hijack"), nil); !errors.Is(err, ErrConversationNotFound) {
		t.Errorf("send as another User: %v", err)
	}
	if n := len(co.srv.Messages(u.ConversationID)); n != 1 {
		t.Errorf("%d messages", n)
	}
	if _, err := st2.Conversation(ctx, co.ac.Issuer, u.ConversationID); err == nil {
		t.Error("a conversation the Company refused was kept")
	}
	if !strings.Contains(rt.violations(), "another User") {
		t.Errorf("violations: %q", rt.violations())
	}
}

// TestRateLimited: a 429 the caller cannot wait out is reported without a
// retry, and nothing more is sent.
func TestRateLimited(t *testing.T) {
	co := newCompany(t, nil, &poppytest.Options{})
	tr := co.tracker(t)
	co.srv.RateLimit("api."+co.srv.Domain(), "/poppy/conversations", 1, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := tr.Start(ctx, textMsg("Hello"), "", nil)
	if err == nil || !isRateLimit(err) {
		t.Fatalf("err = %v", err)
	}
	if n := co.srv.Count("api."+co.srv.Domain(), "/poppy/conversations"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
}
