// This file keeps messages not yet known to be delivered, so that sending
// the same content again, even after a restart, reuses the message's ID
// and the Company records it once (Poppy 0.1 §7.3: "To retry a message, it
// sends it again with the same ID"). A pending message is stored, encrypted
// like every secret (it holds the User's words), before its first attempt,
// and removed once the Company has answered it.

package conversation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// pendingRecord is a stored pending message.
type pendingRecord struct {
	ID             string      `json:"id"`
	ConversationID string      `json:"conversation_id,omitempty"` // "" for a start
	ParentID       string      `json:"parent_id,omitempty"`       // a Direct Conversation's parent
	Message        messageWire `json:"message"`
}

// pendingName names the pending message with this content for this
// target: a later message of a conversation, or a start (with its parent).
// The content is hashed so that sending the same content again finds it.
func (t *Tracker) pendingName(conversationID, parentID string, m Message) string {
	target := "start/" + parentID
	if conversationID != "" {
		target = "conversation/" + conversationID
	}
	m.ID = ""
	content, _ := json.Marshal(toWire(m))
	h := sha256.Sum256(append([]byte(target+"\x00"), content...))
	return fmt.Sprintf("conversation/pending/%s/%s/%s", t.owner.Issuer, t.owner.UserID, hex.EncodeToString(h[:16]))
}

// claimID gives m its ID: the ID of the pending message with the same
// content for the same target when there is one, else a new one; and
// stores m as pending before it is sent.
func (t *Tracker) claimID(ctx context.Context, conversationID, parentID string, m *Message) (string, error) {
	name := t.pendingName(conversationID, parentID, *m)
	if m.ID == "" {
		raw, err := t.st.Secret(ctx, name)
		var rec pendingRecord
		switch {
		case err == nil && json.Unmarshal(raw, &rec) == nil && validID(rec.ID):
			m.ID = rec.ID
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return "", err
		default:
			m.ID = NewMessageID()
		}
	}
	rec, err := json.Marshal(pendingRecord{ID: m.ID, ConversationID: conversationID, ParentID: parentID, Message: toWire(*m)})
	if err != nil {
		return "", err
	}
	if err := t.st.PutSecret(ctx, name, rec); err != nil {
		return "", err
	}
	return name, nil
}

// settle removes a pending message once the Company has answered it: with
// success, or with an error that sending it again cannot change. After a
// network failure, a 5xx, a cancelled wait or a malformed answer it stays,
// for the message may have been recorded.
func (t *Tracker) settle(ctx context.Context, name string, err error) {
	var ce *Error
	if err == nil || isAuthFinal(err) && !isRateLimit(err) || errors.As(err, &ce) && ce.Status < 500 {
		// Best effort: a pending message left behind only reuses its ID.
		_ = t.st.DeleteSecret(context.WithoutCancel(ctx), name)
	}
}

// UndeliveredError reports a message that could not be confirmed
// delivered: the Company may or may not have recorded it. Sending the same
// content to the same conversation again, even after a restart, reuses its
// ID, so the Company records it at most once.
type UndeliveredError struct {
	MessageID string
	Err       error
}

func (e *UndeliveredError) Error() string {
	return fmt.Sprintf("conversation: message %s not confirmed delivered (sending the same content again is safe): %v", e.MessageID, e.Err)
}

func (e *UndeliveredError) Unwrap() error { return e.Err }
