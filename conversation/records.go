// This file is the Tracker's record-keeping: each event handled once, the
// cursor and state saved after them, and what the Company's answers and
// errors say of the conversations the store holds. Writes go on even when
// the caller's context is cancelled meanwhile, so what was handled stays
// handled.

package conversation

import (
	"context"
	"errors"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// handle handles events in order, skipping those handled before, then
// saves the cursor and state: an answer's State when given, else what the
// events said. It returns how many events it handled for the first time.
// The store is written even when ctx is cancelled meanwhile, so what was
// handled stays handled.
func (t *Tracker) handle(ctx context.Context, id string, events []Event, cursor string, state *State, upd *Update) (int, error) {
	ctx = context.WithoutCancel(ctx)
	defer t.locks.lock(t.key(id))()
	rec, err := t.st.Conversation(ctx, t.owner.Issuer, id)
	if err != nil {
		return 0, err
	}
	var fresh []string
	batch := map[string]bool{}
	for i := range events {
		ev := &events[i]
		if batch[ev.ID] {
			continue
		}
		// Poppy 0.1 §7.5: "A read after a reconnect can return events
		// again, so it skips event IDs it has already handled."
		seen, err := t.st.Seen(ctx, t.owner.Issuer, id, ev.ID)
		if err != nil {
			return 0, err
		}
		if seen {
			continue
		}
		batch[ev.ID] = true
		fresh = append(fresh, ev.ID)
		report, err := t.apply(ctx, ev, upd)
		if err != nil {
			return 0, err
		}
		if report {
			upd.Events = append(upd.Events, *ev)
		}
	}
	if err := t.st.MarkSeen(ctx, t.owner.Issuer, id, fresh...); err != nil {
		return 0, err
	}
	if state != nil {
		upd.State = *state
	}
	// Poppy 0.1 §7.5: "The Personal Agent handles events in order and saves
	// the cursor after them."
	rec.Cursor = cursor
	setState(&rec, upd.State)
	return len(fresh), t.st.PutConversation(ctx, rec)
}

// sent reports whether this agent sent the message id in the
// conversation, by the mark the store keeps from before it was sent.
func (t *Tracker) sent(ctx context.Context, conversationID, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	return t.st.Seen(ctx, t.owner.Issuer, conversationID, sentMark(id))
}

// markSent records that this agent sends the message id in the
// conversation. The store keeps it across restarts, so the message's own
// event is known as this agent's whenever it comes.
func (t *Tracker) markSent(ctx context.Context, conversationID, id string) error {
	// Under a name no event ID can have (":" is not in the ID alphabet).
	return t.st.MarkSeen(context.WithoutCancel(ctx), t.owner.Issuer, conversationID, sentMark(id))
}

func setState(rec *store.Conversation, st State) {
	if st.Status != "" {
		rec.Status, rec.Responder = st.Status, st.Responder
		rec.Closed = st.Status == StatusClosed
	}
}

func (t *Tracker) key(id string) string { return t.owner.Issuer + "\x00" + id }

// load returns the stored conversation, adopting one the store does not
// know (created reports that) so that a conversation whose state was lost
// is read from its beginning.
func (t *Tracker) load(ctx context.Context, id string) (rec store.Conversation, created bool, err error) {
	if !validID(id) {
		return rec, false, errors.New("conversation: not a conversation ID")
	}
	rec, err = t.st.Conversation(ctx, t.owner.Issuer, id)
	if !errors.Is(err, store.ErrNotFound) {
		return rec, false, err
	}
	defer t.locks.lock(t.key(id))()
	rec = store.Conversation{ID: id, Issuer: t.owner.Issuer, UserID: t.owner.UserID, Domain: t.owner.Domain}
	return rec, true, t.st.PutConversation(ctx, rec)
}

// create records a conversation just started; a retried start returns one
// already recorded, which keeps its cursor.
func (t *Tracker) create(ctx context.Context, id, parentID string, st State) error {
	defer t.locks.lock(t.key(id))()
	rec, err := t.st.Conversation(ctx, t.owner.Issuer, id)
	if errors.Is(err, store.ErrNotFound) {
		rec, err = store.Conversation{ID: id, Issuer: t.owner.Issuer, UserID: t.owner.UserID,
			Domain: t.owner.Domain, ParentID: parentID}, nil
	}
	if err != nil {
		return err
	}
	setState(&rec, st)
	return t.st.PutConversation(context.WithoutCancel(ctx), rec)
}

func (t *Tracker) savedCursor(ctx context.Context, id string) (string, error) {
	rec, err := t.st.Conversation(ctx, t.owner.Issuer, id)
	return rec.Cursor, err
}

// saveState records a state answered by the Company.
func (t *Tracker) saveState(ctx context.Context, rec store.Conversation, st State) (*Update, error) {
	unlock := t.locks.lock(t.key(rec.ID))
	defer unlock()
	cur, err := t.st.Conversation(ctx, t.owner.Issuer, rec.ID)
	if err != nil {
		return nil, err
	}
	setState(&cur, st)
	if err := t.st.PutConversation(context.WithoutCancel(ctx), cur); err != nil {
		return nil, err
	}
	return &Update{ConversationID: rec.ID, ParentID: rec.ParentID, State: st}, nil
}

// markClosed records a conversation as closed, if the store knows it.
// status "" means closed with status closed; otherwise the status is kept
// and the conversation only leaves the open ones (the Company forgot it).
func (t *Tracker) markClosed(ctx context.Context, id, status string) error {
	defer t.locks.lock(t.key(id))()
	rec, err := t.st.Conversation(ctx, t.owner.Issuer, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if status == "" {
		rec.Status = StatusClosed
	}
	rec.Closed = true
	return t.st.PutConversation(context.WithoutCancel(ctx), rec)
}

// closeChildren records the open Direct Conversations of a closed parent
// as closed.
func (t *Tracker) closeChildren(ctx context.Context, parentID string) error {
	all, err := t.st.Conversations(ctx, "")
	if err != nil {
		return err
	}
	for _, c := range all {
		if c.Issuer == t.owner.Issuer && c.ParentID == parentID && !c.Closed {
			if err := t.markClosed(ctx, c.ID, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// failed records what an error says of a conversation and returns the
// error to report: a conversation the Company does not know leaves the
// open ones (one just adopted is forgotten); a closed one is recorded
// closed; an open Direct Conversation is recorded as the parent's; a
// message whose delivery is unknown becomes an *UndeliveredError.
func (t *Tracker) failed(ctx context.Context, id string, adopted bool, msgID string, err error) error {
	var ce *Error
	errors.As(err, &ce)
	var rerr error
	switch {
	case id == "":
	case errors.Is(err, ErrConversationNotFound) && adopted:
		rerr = t.st.DeleteConversation(context.WithoutCancel(ctx), t.owner.Issuer, id)
	case errors.Is(err, ErrConversationNotFound):
		rerr = t.markClosed(ctx, id, "keep")
	case errors.Is(err, ErrConversationClosed):
		rerr = t.markClosed(ctx, id, "")
	case errors.Is(err, ErrDirectConversationOpen) && ce.ConversationID != "":
		rerr = t.adoptChild(ctx, id, ce.ConversationID)
	}
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if msgID != "" && (ce == nil || ce.Status >= 500) && !isAuthFinal(err) {
		return &UndeliveredError{MessageID: msgID, Err: err}
	}
	return err
}

// adoptChild records an open Direct Conversation of parentID that the
// store does not know (started by another process, say).
func (t *Tracker) adoptChild(ctx context.Context, parentID, childID string) error {
	defer t.locks.lock(t.key(childID))()
	_, err := t.st.Conversation(ctx, t.owner.Issuer, childID)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return t.st.PutConversation(context.WithoutCancel(ctx), store.Conversation{ID: childID, Issuer: t.owner.Issuer,
		UserID: t.owner.UserID, Domain: t.owner.Domain, ParentID: parentID})
}

// keyedMutex serializes the handling of each conversation's events among
// the Trackers that share it: checking events seen, saving the cursor and
// state. The zero value is ready; it is safe for concurrent use.
type keyedMutex struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int // guarded by keyedMutex.mu
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
