// This file keeps messages not yet known to be delivered, so that none is
// lost to a crash and none arrives twice or late (Poppy 0.1 §7.3: "To
// retry a message, it sends it again with the same ID"). A pending message
// is stored, encrypted like every secret (it holds the User's words),
// before its first attempt, and removed once the Company has answered it.
// The next call of a Tracker of the same Company and User sends it again
// with its ID while it is young, and otherwise reports it not sent and
// forgets it: a "yes, pay" must not arrive days late. A Worker (worker.go)
// does the same in the background, whether or not the person calls again,
// and keeps what became of each message for their next call to report.
// Each send, the first and every resend, holds a lease on the message in
// the store, so that replicas sharing it send one message one at a time:
// a replica's call skips a message another replica is sending, and takes
// it over once that one's lease expires (it crashed) or is given back
// unanswered.

package conversation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// pendingLeaseTTL is how long the lease of sending a pending message lasts
// unless renewed (it is, every third, while the send lasts): a replica
// that crashed while sending leaves its messages to the next call of
// another replica this long after.
const pendingLeaseTTL = 10 * time.Second

// sending is a pending message being sent: its name in the store, and the
// lease held on it while it is sent (none when another holder had it: that
// holder sends the same ID, which the Company records once).
type sending struct {
	name  string
	lease *store.Lease
	stop  func() // ends the lease's renewals
}

// leaseSend takes the lease of sending the pending message name, at once
// or not at all, and keeps it renewed until release.
func (t *Tracker) leaseSend(ctx context.Context, name string) (*sending, error) {
	b := make([]byte, 12)
	rand.Read(b)
	l, err := t.st.AcquireLease(ctx, "conversation-pending "+name, base64.RawURLEncoding.EncodeToString(b), pendingLeaseTTL)
	if errors.Is(err, store.ErrLeaseHeld) {
		return &sending{name: name, stop: func() {}}, nil
	}
	if err != nil {
		return nil, err
	}
	_, stop := t.st.KeepLease(context.WithoutCancel(ctx), l, pendingLeaseTTL)
	return &sending{name: name, lease: &l, stop: stop}, nil
}

// release gives the lease of a send back, so another replica need not
// wait for its expiry to send the message again.
func (t *Tracker) release(ctx context.Context, snd *sending) {
	snd.stop()
	if snd.lease != nil {
		_ = t.st.ReleaseLease(context.WithoutCancel(ctx), *snd.lease) // a lease not given back expires
		snd.lease = nil
	}
}

// pendingRecord is a stored pending message.
type pendingRecord struct {
	ID             string      `json:"id"`
	ConversationID string      `json:"conversation_id,omitempty"` // "" for a start
	ParentID       string      `json:"parent_id,omitempty"`       // a Direct Conversation's parent
	Message        messageWire `json:"message"`
	// Created is when the message was first sent; zero in records of
	// older versions, which are never sent again.
	Created time.Time `json:"created,omitzero"`
	// Issuer, UserID and Domain are the Tracker's Owner, and Person its
	// TrackerOptions.Person, so that a Worker knows whose Session sends
	// it; empty in records of older versions, which only the person's
	// calls send.
	Issuer string `json:"issuer,omitempty"`
	UserID string `json:"user_id,omitempty"`
	Domain string `json:"domain,omitempty"`
	Person string `json:"person,omitempty"`
}

// owner is the Owner of the Tracker that stored the record.
func (rec *pendingRecord) owner() Owner {
	return Owner{Issuer: rec.Issuer, UserID: rec.UserID, Domain: rec.Domain}
}

// Outcomes of a pending message (Resent.Outcome).
const (
	// ResentDelivered: sent again with its ID, and the Company answered
	// (it records a message once, §7.3).
	ResentDelivered = "delivered"
	// ResentExpired: older than TrackerOptions.PendingMaxAge, it was not
	// sent again and never will be; it may or may not have arrived.
	ResentExpired = "expired"
	// ResentRefused: the Company refused it (message_id_conflict, a closed
	// conversation, ...): it is not sent again.
	ResentRefused = "refused"
	// ResentUnconfirmed: sent again, still without an answer; the next
	// call tries again while it is young.
	ResentUnconfirmed = "unconfirmed"
)

// Resent is what a call did with a message an earlier call or process left
// pending: a message not known to be delivered when it stopped.
type Resent struct {
	MessageID string
	// ConversationID is its conversation: for a start delivered now, the
	// new one; "" for a start not delivered.
	ConversationID string
	// ParentID is the parent of a Direct Conversation it starts.
	ParentID string
	// Text is the message's text, to say which one it was.
	Text string
	// Outcome is one of the Resent constants.
	Outcome string
	// Err is why a refused or unconfirmed message was not delivered.
	Err error
}

// pendingPrefix is the store's prefix of the pending messages of the
// Tracker's Company and User.
func (t *Tracker) pendingPrefix() string {
	return fmt.Sprintf("conversation/pending/%s/%s/", t.owner.Issuer, t.owner.UserID)
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
	return t.pendingPrefix() + hex.EncodeToString(h[:16])
}

// young reports whether a pending message may still be sent again.
func (t *Tracker) young(rec *pendingRecord) bool {
	return !rec.Created.IsZero() && t.now().Sub(rec.Created) < t.opts.PendingMaxAge
}

// claimID gives m its ID: the ID of the pending message with the same
// content for the same target when there is one, else a new one; and
// stores m as pending before it is sent, holding the lease of sending it
// when no other replica does (one that does sends the same ID, which the
// Company records once). resendPending has run first, so a pending message
// found here is young.
func (t *Tracker) claimID(ctx context.Context, conversationID, parentID string, m *Message) (*sending, error) {
	name := t.pendingName(conversationID, parentID, *m)
	snd, err := t.leaseSend(ctx, name)
	if err != nil {
		return nil, err
	}
	rec, err := t.pending(ctx, name)
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		t.release(ctx, snd)
		return nil, err
	case err == nil && m.ID == "" && t.young(rec):
		m.ID = rec.ID
	default:
		rec = &pendingRecord{Created: t.now()}
		if m.ID == "" {
			m.ID = NewMessageID()
		}
	}
	rec.ID, rec.ConversationID, rec.ParentID, rec.Message = m.ID, conversationID, parentID, toWire(*m)
	rec.Issuer, rec.UserID, rec.Domain, rec.Person = t.owner.Issuer, t.owner.UserID, t.owner.Domain, t.opts.Person
	raw, err := json.Marshal(rec)
	if err == nil {
		err = t.writePending(ctx, snd.lease, name, raw)
	}
	if err != nil {
		t.release(ctx, snd)
		return nil, err
	}
	return snd, nil
}

// writePending writes value under name, or deletes name when value is
// nil: a pending message, or the outcome of one (outcome.go). held is the
// lease of sending the message that the caller holds; nil when it holds
// none (another holder sends the same ID, or a person's call takes the
// outcomes kept for it). Every write of pending state goes through here,
// so that what a write under a lease must check is checked in one place.
func (t *Tracker) writePending(ctx context.Context, held *store.Lease, name string, value []byte) error {
	st := t.st
	if held != nil {
		st = t.st.Fenced(*held) // refused with store.ErrLeaseLost once another holder has the lease
	}
	if value == nil {
		return st.DeleteSecret(ctx, name)
	}
	return st.PutSecret(ctx, name, value)
}

// pending reads the pending message stored under name.
func (t *Tracker) pending(ctx context.Context, name string) (*pendingRecord, error) {
	return loadPending(ctx, t.st, name)
}

// loadPending reads the pending message stored under name in st.
func loadPending(ctx context.Context, st *store.Store, name string) (*pendingRecord, error) {
	raw, err := st.Secret(ctx, name)
	if err != nil {
		return nil, err
	}
	var rec pendingRecord
	if err := json.Unmarshal(raw, &rec); err != nil || !validID(rec.ID) {
		return nil, store.ErrNotFound // unreadable: as good as gone
	}
	return &rec, nil
}

// settle removes a pending message once the Company has answered it: with
// success, or with an error that sending it again cannot change. After a
// network failure, a 5xx, a cancelled wait or a malformed answer it stays,
// for the message may have been recorded, and the Workers hear of it
// (PendingChannel). Either way the lease of sending it is given back.
func (t *Tracker) settle(ctx context.Context, snd *sending, err error) {
	t.finish(ctx, snd, err)
	if !final(err) {
		t.announcePending(context.WithoutCancel(ctx))
	}
}

// finish is settle without the announcement, for a Worker, which sends
// what it leaves pending again itself.
func (t *Tracker) finish(ctx context.Context, snd *sending, err error) {
	if final(err) {
		// Best effort: a pending message left behind is sent again while
		// young, with its ID, which the Company recognizes.
		_ = t.writePending(context.WithoutCancel(ctx), snd.lease, snd.name, nil)
	}
	t.release(ctx, snd)
}

// final reports whether the answer to a message is one that sending it
// again cannot change: success, a refusal of the Company, a token error.
func final(err error) bool {
	var ce *Error
	return err == nil || isAuthFinal(err) && !isRateLimit(err) || errors.As(err, &ce) && ce.Status < 500
}

// resendPending sends again, with their IDs, the pending messages of the
// Tracker's Company and User that earlier calls left, oldest name first,
// except skip (the message this call is about to send itself, which keeps
// its ID through claimID). One too old is forgotten and reported expired,
// never sent. Poppy 0.1 §7.3: "If the Company has already accepted a
// message with that ID and the same content, it returns the original
// response and doesn't add the message again."
func (t *Tracker) resendPending(ctx context.Context, skip string) ([]Resent, error) {
	out, err := t.takeOutcomes(ctx) // what a Worker did since the last call
	if err != nil {
		return nil, err
	}
	names, err := t.st.SecretNames(ctx, t.pendingPrefix())
	if err != nil {
		return out, err
	}
	for _, name := range names {
		r, ok, err := t.resendOne(ctx, name, skip, false)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// resendOne deals with the pending message name, and reports whether
// there was one to deal with. With keep (a Worker's, which no person's
// call waits for), an outcome that ends the message (delivered, expired,
// refused) is kept for the person's next call to report, before the
// message is removed.
func (t *Tracker) resendOne(ctx context.Context, name, skip string, keep bool) (Resent, bool, error) {
	defer t.locks.lock("pending\x00" + name)()
	snd, err := t.leaseSend(ctx, name)
	if err != nil {
		return Resent{}, false, err
	}
	defer t.release(ctx, snd) // settle gives it back sooner
	if snd.lease == nil {
		return Resent{}, false, nil // another replica is sending it now
	}
	rec, err := t.pending(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		_ = t.writePending(context.WithoutCancel(ctx), snd.lease, name, nil) // another call sent it, or it is unreadable
		return Resent{}, false, nil
	}
	if err != nil {
		return Resent{}, false, err
	}
	young := t.young(rec)
	if name == skip && young {
		return Resent{}, false, nil
	}
	r := Resent{MessageID: rec.ID, ConversationID: rec.ConversationID, ParentID: rec.ParentID, Text: rec.Message.message().Text}
	if !young {
		return t.forgetExpired(ctx, snd, r, keep)
	}
	r, err = t.sendAgain(ctx, snd, rec, r, keep)
	return r, true, err
}

// sendAgain sends a young pending message again, under the lease snd,
// and settles it; with keep, an outcome that ends it is kept first.
func (t *Tracker) sendAgain(ctx context.Context, snd *sending, rec *pendingRecord, r Resent, keep bool) (Resent, error) {
	var err error
	r.ConversationID, err = t.resend(ctx, rec, rec.Message.message())
	switch {
	case err == nil:
		r.Outcome = ResentDelivered
	case final(err):
		r.Outcome, r.Err = ResentRefused, err
	default:
		r.Outcome, r.Err = ResentUnconfirmed, err
	}
	if kerr := t.keepOutcome(ctx, snd, r, keep && final(err)); kerr != nil {
		return r, kerr // the message stays pending: the next round sends it again, with its ID
	}
	if keep {
		t.finish(ctx, snd, err)
	} else {
		t.settle(ctx, snd, err)
	}
	return r, nil
}

// forgetExpired forgets the pending message of snd, too old to be sent
// again, and reports it (r) expired, keeping that outcome first with keep;
// unless the lease of it was lost: the replica that has it now deals with it.
func (t *Tracker) forgetExpired(ctx context.Context, snd *sending, r Resent, keep bool) (Resent, bool, error) {
	r.Outcome = ResentExpired
	err := t.keepOutcome(ctx, snd, r, keep)
	if err == nil {
		err = t.writePending(context.WithoutCancel(ctx), snd.lease, snd.name, nil)
	}
	if errors.Is(err, store.ErrLeaseLost) {
		return Resent{}, false, nil
	}
	return r, true, err
}

// resend sends a pending message again as it was, without a read, and
// returns its conversation.
func (t *Tracker) resend(ctx context.Context, rec *pendingRecord, m Message) (string, error) {
	if rec.ConversationID != "" {
		if err := t.markSent(ctx, rec.ConversationID, m.ID); err != nil {
			return rec.ConversationID, err
		}
		_, err := t.c.Send(ctx, rec.ConversationID, m, nil)
		return rec.ConversationID, err
	}
	p, err := t.c.Start(ctx, m, rec.ParentID, nil)
	if err != nil {
		return "", err
	}
	if err := t.create(ctx, p.ConversationID, rec.ParentID, p.State); err != nil {
		return p.ConversationID, err
	}
	return p.ConversationID, t.markSent(ctx, p.ConversationID, m.ID)
}

// UndeliveredError reports a message that could not be confirmed
// delivered: the Company may or may not have recorded it. A Worker, or
// the next call of a Tracker of the same Company and User, even after a
// restart, sends it again with its ID while it is young, so the Company
// records it at most once; sending the same content to the same
// conversation meanwhile reuses its ID too.
type UndeliveredError struct {
	MessageID string
	Err       error
}

func (e *UndeliveredError) Error() string {
	return fmt.Sprintf("conversation: message %s not confirmed delivered (it is sent again with its ID): %v", e.MessageID, e.Err)
}

func (e *UndeliveredError) Unwrap() error { return e.Err }

// ResentError is the error of a call that first dealt with pending
// messages: Resent says what became of them, Err what went wrong after.
type ResentError struct {
	Resent []Resent
	Err    error
}

func (e *ResentError) Error() string { return e.Err.Error() }

func (e *ResentError) Unwrap() error { return e.Err }
