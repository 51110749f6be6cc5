// This file implements the requests that change a conversation: starting
// one and sending messages (Poppy 0.1 §7.3, §7.10), handoff (§7.9) and
// closing (§7.12). Each is retried after a network failure or a 5xx answer
// with the same body, so a message keeps its ID and content and the
// Company records it once.

package conversation

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
)

// NewMessageID returns a new message ID: "msg_" and 144 random bits.
// Poppy 0.1 §7.3: the Personal Agent "MUST make it unique for the User";
// §7.2: IDs "SHOULD start with a short prefix for their kind, such as ...
// msg_".
func NewMessageID() string {
	b := make([]byte, 18)
	rand.Read(b) // never fails (crypto/rand)
	return "msg_" + base64.RawURLEncoding.EncodeToString(b)
}

// SendOptions ask for the Company's reply in the answer to a message
// (Poppy 0.1 §7.3 "Replies in the response").
type SendOptions struct {
	// Wait is how long the Company may hold the answer for events to
	// return. Zero: the answer has only the conversation ID and State.
	Wait time.Duration
	// Cursor is where the read of the reply starts; "" from the start of
	// the conversation. Used only with Wait.
	Cursor string
}

// Start starts a conversation with its first message and returns the
// answer: the new conversation's ID and State, and with o.Wait the events
// from o.Cursor. parentID makes it a Direct Conversation linked to that
// conversation (Poppy 0.1 §7.10); "" for none. A retried start returns the
// conversation already started (§7.3).
func (c *Client) Start(ctx context.Context, m Message, parentID string, o *SendOptions) (*Page, error) {
	if parentID != "" && !validID(parentID) {
		return nil, errors.New("conversation: the parent is not a conversation ID")
	}
	p, err := c.post(ctx, "", "", postWire{ParentConversationID: parentID, Message: toWire(m)}, &m, o)
	if err != nil {
		return nil, err
	}
	// Poppy 0.1 §7.3: "The Company returns the new conversation's ID"
	if p.ConversationID == "" {
		return nil, protocolErr("7.3", "the answer to a new conversation has no conversation_id")
	}
	return p, nil
}

// Send sends a later message to a conversation (Poppy 0.1 §7.3) and
// returns the answer: State, and with o.Wait the events from o.Cursor.
func (c *Client) Send(ctx context.Context, conversationID string, m Message, o *SendOptions) (*Page, error) {
	p, err := c.post(ctx, conversationID, "/messages", postWire{Message: toWire(m)}, &m, o)
	if err != nil {
		return nil, err
	}
	if p.ConversationID == "" {
		p.ConversationID = conversationID
	}
	return p, nil
}

// post sends a message to the endpoint (conversationID "") or to a
// conversation's messages URL.
func (c *Client) post(ctx context.Context, conversationID, suffix string, w postWire, m *Message, o *SendOptions) (*Page, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if o == nil {
		o = &SendOptions{}
	}
	cursor := ""
	if o.Wait > 0 {
		cursor = o.Cursor
	}
	u, err := c.url(conversationID, suffix, cursor, o.Wait)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	a, err := c.do(ctx, http.MethodPost, u, body, o.Wait)
	if err != nil {
		return nil, err
	}
	return parsePage(a.body, cursor)
}

// Handoff asks for a person at the Company (Poppy 0.1 §7.9) and returns
// the State, queued while the Company finds someone.
func (c *Client) Handoff(ctx context.Context, conversationID string) (State, error) {
	// Poppy 0.1 §7.9: "The Personal Agent asks for a person at the Company
	// with an empty JSON object"
	return c.control(ctx, conversationID, "/handoff")
}

// Close closes a conversation (Poppy 0.1 §7.12) and returns its State.
// A conversation already closed gives an error matching
// ErrConversationClosed.
func (c *Client) Close(ctx context.Context, conversationID string) (State, error) {
	// Poppy 0.1 §7.12: "sending an empty JSON object to its close URL"
	return c.control(ctx, conversationID, "/close")
}

func (c *Client) control(ctx context.Context, conversationID, suffix string) (State, error) {
	u, err := c.url(conversationID, suffix, "", 0)
	if err != nil {
		return State{}, err
	}
	a, err := c.do(ctx, http.MethodPost, u, []byte("{}"), 0)
	if err != nil {
		return State{}, err
	}
	p, err := parsePage(a.body, "")
	if err != nil {
		return State{}, err
	}
	return p.State, nil
}

// isAuthFinal reports whether err is an answer from the Session's client
// that retrying cannot change: a token error such as sign_in_required, or a
// rate limit the caller's deadline cannot wait out (nothing was sent).
func isAuthFinal(err error) bool {
	var (
		ae *auth.Error
		ra *auth.RetryAfterError
	)
	return errors.As(err, &ae) || errors.As(err, &ra)
}

// isRateLimit reports whether err is a rate limit the caller could not
// wait out: nothing was sent.
func isRateLimit(err error) bool {
	var ra *auth.RetryAfterError
	return errors.As(err, &ra)
}
