// This file keeps what a Worker did with a pending message (pending.go,
// worker.go) until the person's next call reports it, as that call would
// have reported the message had it sent it itself (Update.Resent): sent
// again with its ID and delivered, too old to send, or refused by the
// Company. An outcome is kept in the store, sealed like the message, under
// the message's ID, before the message is removed; the person's next call
// of a Tracker of the same Company and User takes it. A message still
// unconfirmed keeps no outcome: it stays pending, and is sent again.

package conversation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// PendingChannel is the store notification channel on which a message
// left pending (not confirmed delivered) is announced, so that the
// Workers of every replica look at once instead of at their next sweep.
// The payload is a digest of the local user (pendingKey): it says nothing
// of who the person is, nor of the message.
const PendingChannel = "poppy_pending"

// announcePending tells the Workers that the Tracker's person has a
// message pending. It is at most once: a Worker's sweep finds it anyway.
func (t *Tracker) announcePending(ctx context.Context) {
	_ = t.st.Notify(ctx, PendingChannel, pendingKey(t.st.User()))
}

// pendingKey is PendingChannel's payload for the local user key.
func pendingKey(key string) string {
	h := sha256.Sum256([]byte("conversation pending\x00" + key))
	return hex.EncodeToString(h[:16])
}

// outcomeWire is a kept outcome.
type outcomeWire struct {
	MessageID      string `json:"message_id"`
	ConversationID string `json:"conversation_id,omitempty"`
	ParentID       string `json:"parent_id,omitempty"`
	Text           string `json:"text,omitempty"`
	Outcome        string `json:"outcome"`
	// Code, Status and Description are the Company's refusal (an *Error,
	// or an *auth.Error's code), Err any other error's text.
	Code        string `json:"code,omitempty"`
	Status      int    `json:"status,omitempty"`
	Description string `json:"description,omitempty"`
	Err         string `json:"err,omitempty"`
}

// outcomePrefix is the store's prefix of the outcomes kept for the
// Tracker's Company and User.
func (t *Tracker) outcomePrefix() string {
	return fmt.Sprintf("conversation/resent/%s/%s/", t.owner.Issuer, t.owner.UserID)
}

// keepOutcome keeps r for the person's next call, when keep is set, under
// the lease of sending the message (snd).
func (t *Tracker) keepOutcome(ctx context.Context, snd *sending, r Resent, keep bool) error {
	if !keep {
		return nil
	}
	w := outcomeWire{MessageID: r.MessageID, ConversationID: r.ConversationID, ParentID: r.ParentID, Text: r.Text, Outcome: r.Outcome}
	var (
		ce *Error
		ae *auth.Error
	)
	switch {
	case errors.As(r.Err, &ce):
		w.Code, w.Status, w.Description = ce.Code, ce.Status, ce.Description
	case errors.As(r.Err, &ae):
		w.Code, w.Status = ae.Code, ae.Status
	case r.Err != nil:
		w.Err = r.Err.Error()
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return t.writePending(context.WithoutCancel(ctx), snd.lease, t.outcomePrefix()+r.MessageID, raw)
}

// takeOutcomes returns the outcomes kept for the Tracker's Company and
// User, oldest name first, and removes them: each is reported once by the
// calls of this process (two replicas' calls at the same instant may both
// report one).
func (t *Tracker) takeOutcomes(ctx context.Context) ([]Resent, error) {
	names, err := t.st.SecretNames(ctx, t.outcomePrefix())
	if err != nil {
		return nil, err
	}
	var out []Resent
	for _, name := range names {
		r, ok, err := t.takeOutcome(ctx, name)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// takeOutcome reads and removes the outcome name.
func (t *Tracker) takeOutcome(ctx context.Context, name string) (Resent, bool, error) {
	defer t.locks.lock("outcome\x00" + name)()
	raw, err := t.st.Secret(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return Resent{}, false, nil // another call took it
	}
	if err != nil {
		return Resent{}, false, err
	}
	if err := t.writePending(context.WithoutCancel(ctx), nil, name, nil); err != nil {
		return Resent{}, false, err
	}
	var w outcomeWire
	if json.Unmarshal(raw, &w) != nil || !validID(w.MessageID) {
		return Resent{}, false, nil // unreadable: as good as gone
	}
	r := Resent{MessageID: w.MessageID, ConversationID: w.ConversationID, ParentID: w.ParentID, Text: w.Text, Outcome: w.Outcome}
	switch {
	case w.Code != "" || w.Status != 0:
		r.Err = &Error{Code: w.Code, Status: w.Status, Description: w.Description}
	case w.Err != "":
		r.Err = errors.New(w.Err)
	}
	return r, true, nil
}
