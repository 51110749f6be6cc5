// This file is the Tracker's reading: JSON reads and streams from the
// saved cursor, has_more, expired cursors, reconnection, and the handling
// of each event once, with the state kept in the store.

package conversation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// follow reads a conversation from cursor until the wait is over: at once
// when must is set, again at once while has_more (§7.5: "When has_more is
// true, the Personal Agent reads again right away"), and then until upd is
// settled or the deadline passes.
func (t *Tracker) follow(ctx context.Context, id, cursor string, must, hasMore bool, deadline time.Time, o *ReadOptions, upd *Update) error {
	seen := returned{}
	for must || hasMore || !upd.settled() && timeNow().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("conversation: %w", err) // the caller gave up
		}
		must = false
		if o.Stream && !hasMore && timeNow().Before(deadline) {
			var err error
			if hasMore, err = t.stream(ctx, id, &cursor, deadline, o, upd, seen); err != nil {
				return err
			}
			continue
		}
		wait := time.Duration(0)
		if !hasMore {
			wait = max(deadline.Sub(timeNow()), 0)
		}
		start := timeNow()
		p, err := t.c.Read(ctx, id, cursor, wait)
		if errors.Is(err, ErrCursorExpired) && cursor != "" {
			t.expired(&cursor, upd, seen)
			must = true
			continue
		}
		if err != nil {
			return err
		}
		n := len(upd.Events)
		if cursor, err = t.handle(ctx, id, p.Events, p.Cursor, &p.State, upd); err != nil {
			return err
		}
		if err := seen.check(p); err != nil {
			return err
		}
		hasMore = p.HasMore
		t.pace(ctx, start, wait, deadline, hasMore || len(upd.Events) > n, upd)
	}
	if o.Stream && upd.settled() {
		return t.flush(ctx, id, cursor, upd, seen)
	}
	return nil
}

// flush collects, without waiting, the events the Company already has once a
// streamed wait has settled. A stream is left at the first event that
// settles the wait, and what follows it at once (a person's message after
// the state event that announced them) belongs in the same result.
func (t *Tracker) flush(ctx context.Context, id, cursor string, upd *Update, seen returned) error {
	for {
		p, err := t.c.Read(ctx, id, cursor, 0)
		if err != nil {
			return err
		}
		if cursor, err = t.handle(ctx, id, p.Events, p.Cursor, &p.State, upd); err != nil {
			return err
		}
		if err := seen.check(p); err != nil || !p.HasMore {
			return err
		}
	}
}

// returned holds the IDs of the events read in one follow, to tell a page
// with has_more that brings nothing new.
type returned map[string]bool

// check records p's events and refuses a page that says has_more but
// returns no event not returned before in this follow: reading again right
// away would bring the same, forever. Poppy 0.1 §7.5: "Every successful
// read MUST include cursor ... cursor is the last event returned, or the
// request's cursor if there were none. When has_more is true, the Personal
// Agent reads again right away." Events are told apart by ID; cursors are
// never compared (§7.5: "Cursors are opaque").
func (r returned) check(p *Page) error {
	fresh := false
	for _, ev := range p.Events {
		if !r[ev.ID] {
			r[ev.ID], fresh = true, true
		}
	}
	if p.HasMore && !fresh {
		return protocolErr("7.5", "has_more on a page with no event after the cursor")
	}
	return nil
}

// expired restarts reading from the beginning. Poppy 0.1 §7.5: "A cursor
// for events it no longer has returns cursor_expired. The Personal Agent
// then reads from the beginning and SHOULD tell the User that part of the
// conversation is missing."
func (t *Tracker) expired(cursor *string, upd *Update, seen returned) {
	*cursor = ""
	upd.HistoryMissing = true
	clear(seen) // what was returned comes again
}

// stream follows a conversation over streams until upd is settled or the
// deadline passes, reconnecting whenever the Company closes one. It
// returns has_more when the Company answered with JSON instead.
func (t *Tracker) stream(ctx context.Context, id string, cursor *string, deadline time.Time, o *ReadOptions, upd *Update, seen returned) (bool, error) {
	sctx, cancel := context.WithTimeout(ctx, deadline.Sub(timeNow()))
	defer cancel()
	resume := false
	for !upd.settled() && sctx.Err() == nil {
		start, wait := timeNow(), deadline.Sub(timeNow())
		s, p, err := t.c.Subscribe(sctx, id, *cursor, resume, wait)
		switch {
		case errors.Is(err, ErrCursorExpired) && *cursor != "":
			t.expired(cursor, upd, seen)
			resume = false
			continue
		case err != nil && sctx.Err() != nil && ctx.Err() == nil:
			return false, nil // the wait is over
		case err != nil:
			return false, err
		case p != nil:
			n := len(upd.Events)
			if *cursor, err = t.handle(ctx, id, p.Events, p.Cursor, &p.State, upd); err == nil {
				err = seen.check(p)
			}
			if err == nil {
				t.pace(ctx, start, wait, deadline, p.HasMore || len(upd.Events) > n, upd)
			}
			return p.HasMore, err
		}
		got, err := t.drain(ctx, s, id, cursor, o, upd)
		s.Close()
		if err != nil {
			return false, err
		}
		// The Company closed the stream, or the wait is over.
		resume = true
		if !got && !upd.settled() {
			sleep(sctx, max(s.Retry(), time.Second))
		}
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up, not the wait: sctx ended with ctx.
		return false, fmt.Errorf("conversation: %w", err)
	}
	return false, nil
}

// drain handles a stream's events until it ends or upd is settled, and
// reports whether it delivered any event.
func (t *Tracker) drain(ctx context.Context, s *Stream, id string, cursor *string, o *ReadOptions, upd *Update) (bool, error) {
	partial := map[string]bool{} // messages shown in part
	got := false
	for !upd.settled() {
		it, err := s.Next()
		if errors.Is(err, errSSETooLarge) {
			return got, err
		}
		if err != nil {
			// Poppy 0.1 §7.6: "After a reconnect, it drops any pieces of a
			// message it didn't receive in full."
			if len(partial) > 0 {
				o.progress(Progress{Interrupted: true})
			}
			return got, nil
		}
		if it.Delta != nil {
			// Poppy 0.1 §7.6: "It MUST NOT act on text from a text-delta
			// event": pieces are shown, never kept.
			partial[it.Delta.MessageID] = true
			o.progress(Progress{Delta: it.Delta})
			continue
		}
		got = true
		ev := *it.Event
		if ev.Message != nil {
			delete(partial, ev.Message.ID) // replaced by the complete message
		}
		before := upd.State
		if *cursor, err = t.handle(ctx, id, []Event{ev}, it.Cursor, nil, upd); err != nil {
			return got, err
		}
		if upd.State != before {
			st := upd.State
			o.progress(Progress{State: &st})
		}
	}
	return got, nil
}

func (o *ReadOptions) progress(p Progress) {
	if o.Progress != nil {
		o.Progress(p)
	}
}

// pace pauses after a held read that brought nothing new and came back
// well before its wait, so that a Company that does not hold reads is not
// read again at once, over and over. Poppy 0.1 §7.5: the Company "MAY
// return sooner, or cap wait".
func (t *Tracker) pace(ctx context.Context, start time.Time, wait time.Duration, deadline time.Time, news bool, upd *Update) {
	held := min(wait, t.c.opts.MaxWait) // what the request asked for
	if news || held <= 0 || upd.settled() || timeNow().Sub(start) >= held/2 {
		return
	}
	sleep(ctx, min(time.Second, deadline.Sub(timeNow())))
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// handle handles events in order, skipping those handled before, then
// saves the cursor and state: an answer's State when given, else what the
// events said. It returns the cursor saved. The store is written even
// when ctx is cancelled meanwhile, so what was handled stays handled.
func (t *Tracker) handle(ctx context.Context, id string, events []Event, cursor string, state *State, upd *Update) (string, error) {
	ctx = context.WithoutCancel(ctx)
	defer handling.lock(t.key(id))()
	rec, err := t.st.Conversation(ctx, t.owner.Issuer, id)
	if err != nil {
		return "", err
	}
	var fresh []string
	batch := map[string]bool{}
	for i := range events {
		ev := &events[i]
		if batch[ev.ID] {
			continue
		}
		seen, err := t.st.Seen(ctx, t.owner.Issuer, id, ev.ID)
		if err != nil {
			return "", err
		}
		if seen {
			continue
		}
		batch[ev.ID] = true
		fresh = append(fresh, ev.ID)
		report, err := t.apply(ctx, ev, upd)
		if err != nil {
			return "", err
		}
		if report {
			upd.Events = append(upd.Events, *ev)
		}
	}
	if err := t.st.MarkSeen(ctx, t.owner.Issuer, id, fresh...); err != nil {
		return "", err
	}
	if state != nil {
		upd.State = *state
	}
	// Poppy 0.1 §7.5: "The Personal Agent handles events in order and saves
	// the cursor after them."
	rec.Cursor = cursor
	setState(&rec, upd.State)
	return cursor, t.st.PutConversation(ctx, rec)
}

// apply applies one new event and reports whether to return it.
func (t *Tracker) apply(ctx context.Context, ev *Event, upd *Update) (bool, error) {
	switch ev.Type {
	case EventState:
		upd.State = State{Status: ev.Status, Responder: ev.Responder}
	case EventMessage:
		if ev.Message.Role == RoleAgent && ev.Message.ID != "" {
			own, err := t.st.Seen(ctx, t.owner.Issuer, upd.ConversationID, sentMark(ev.Message.ID))
			return !own, err
		}
	case EventDirectClosed:
		return true, t.markClosed(ctx, ev.ConversationID, "")
	}
	return ev.Known(), nil
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
	defer handling.lock(t.key(id))()
	rec = store.Conversation{ID: id, Issuer: t.owner.Issuer, UserID: t.owner.UserID, Domain: t.owner.Domain}
	return rec, true, t.st.PutConversation(ctx, rec)
}

// create records a conversation just started; a retried start returns one
// already recorded, which keeps its cursor.
func (t *Tracker) create(ctx context.Context, id, parentID string, st State) error {
	defer handling.lock(t.key(id))()
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
	unlock := handling.lock(t.key(rec.ID))
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
	defer handling.lock(t.key(id))()
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
	defer handling.lock(t.key(childID))()
	_, err := t.st.Conversation(ctx, t.owner.Issuer, childID)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return t.st.PutConversation(context.WithoutCancel(ctx), store.Conversation{ID: childID, Issuer: t.owner.Issuer,
		UserID: t.owner.UserID, Domain: t.owner.Domain, ParentID: parentID})
}
