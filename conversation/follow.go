// This file is the Tracker's reading: JSON reads and streams from the
// saved cursor, has_more, expired cursors and reconnection, for one call at
// a time (a reader). What is handled is recorded by records.go.

package conversation

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// reader is one Tracker call's reading of a conversation: where it stands,
// until when it waits, and what it found. It is not safe for concurrent use.
type reader struct {
	t        *Tracker
	id       string
	cursor   string // the last event handled; "" for the beginning
	deadline time.Time
	o        *ReadOptions
	upd      *Update

	// first asks for one read before anything else, even when the wait is
	// over or upd settled.
	first bool
	// hasMore is the last page's has_more: read again at once (§7.5).
	hasMore bool
	// returned holds the IDs of the events read in this call, to tell a
	// page with has_more that brings nothing new.
	returned map[string]bool
}

// reader returns a reader of conversation id from cursor.
func (t *Tracker) reader(id, cursor string, deadline time.Time, o *ReadOptions, upd *Update) *reader {
	return &reader{t: t, id: id, cursor: cursor, deadline: deadline, o: o, upd: upd, returned: map[string]bool{}}
}

// waiting reports whether the wait goes on: the deadline is ahead.
func (r *reader) waiting() bool { return r.t.now().Before(r.deadline) }

// follow reads the conversation until the wait is over: at once when first
// is set, again at once while has_more (§7.5: "When has_more is true, the
// Personal Agent reads again right away"), and then until upd is settled or
// the deadline passes.
func (r *reader) follow(ctx context.Context) error {
	for r.first || r.hasMore || !r.upd.settled() && r.waiting() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("conversation: %w", err) // the caller gave up
		}
		r.first = false
		var err error
		if r.o.Stream && !r.hasMore && r.waiting() {
			err = r.stream(ctx)
		} else {
			err = r.read(ctx)
		}
		if err != nil {
			return err
		}
	}
	if r.o.Stream && r.upd.settled() {
		return r.flush(ctx)
	}
	return nil
}

// read makes one JSON read, held for the rest of the wait unless has_more
// asks for the next page at once.
func (r *reader) read(ctx context.Context) error {
	wait := time.Duration(0)
	if !r.hasMore {
		wait = max(r.deadline.Sub(r.t.now()), 0)
	}
	start := r.t.now()
	p, err := r.t.c.Read(ctx, r.id, r.cursor, wait)
	if errors.Is(err, ErrCursorExpired) && r.cursor != "" {
		r.expired()
		r.first = true
		return nil
	}
	if err != nil {
		return err
	}
	news, err := r.page(ctx, p)
	if err != nil {
		return err
	}
	r.pace(ctx, start, wait, news)
	return nil
}

// page handles a page of events read, and reports whether it brought news.
func (r *reader) page(ctx context.Context, p *Page) (bool, error) {
	n := len(r.upd.Events)
	var err error
	if r.cursor, err = r.t.handle(ctx, r.id, p.Events, p.Cursor, &p.State, r.upd); err != nil {
		return false, err
	}
	if err := r.check(p); err != nil {
		return false, err
	}
	r.hasMore = p.HasMore
	return p.HasMore || len(r.upd.Events) > n, nil
}

// flush collects, without waiting, the events the Company already has once a
// streamed wait has settled. A stream is left at the first event that
// settles the wait, and what follows it at once (a person's message after
// the state event that announced them) belongs in the same result.
func (r *reader) flush(ctx context.Context) error {
	for {
		p, err := r.t.c.Read(ctx, r.id, r.cursor, 0)
		if err != nil {
			return err
		}
		if r.cursor, err = r.t.handle(ctx, r.id, p.Events, p.Cursor, &p.State, r.upd); err != nil {
			return err
		}
		if err := r.check(p); err != nil || !p.HasMore {
			return err
		}
	}
}

// check records p's events and refuses a page that says has_more but
// returns no event not returned before in this call: reading again right
// away would bring the same, forever. Poppy 0.1 §7.5: "Every successful
// read MUST include cursor ... cursor is the last event returned, or the
// request's cursor if there were none. When has_more is true, the Personal
// Agent reads again right away." Events are told apart by ID; cursors are
// never compared (§7.5: "Cursors are opaque").
func (r *reader) check(p *Page) error {
	fresh := false
	for _, ev := range p.Events {
		if !r.returned[ev.ID] {
			r.returned[ev.ID], fresh = true, true
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
func (r *reader) expired() {
	r.cursor = ""
	r.upd.HistoryMissing = true
	clear(r.returned) // what was returned comes again
}

// stream follows the conversation over streams until upd is settled or the
// deadline passes, reconnecting whenever the Company closes one. A Company
// that answers with JSON instead gives a page, handled like a read's.
func (r *reader) stream(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, r.deadline.Sub(r.t.now()))
	defer cancel()
	resume := false
	for !r.upd.settled() && sctx.Err() == nil {
		start, wait := r.t.now(), r.deadline.Sub(r.t.now())
		s, p, err := r.t.c.Subscribe(sctx, r.id, r.cursor, resume, wait)
		switch {
		case errors.Is(err, ErrCursorExpired) && r.cursor != "":
			r.expired()
			resume = false
			continue
		case err != nil && sctx.Err() != nil && ctx.Err() == nil:
			return nil // the wait is over
		case err != nil:
			return err
		case p != nil:
			news, err := r.page(ctx, p)
			if err == nil {
				r.pace(ctx, start, wait, news)
			}
			return err
		}
		got, err := r.drain(ctx, s)
		s.Close()
		if err != nil {
			return err
		}
		// The Company closed the stream, or the wait is over.
		resume = true
		if !got && !r.upd.settled() {
			sleep(sctx, max(s.Retry(), time.Second))
		}
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up, not the wait: sctx ended with ctx.
		return fmt.Errorf("conversation: %w", err)
	}
	return nil
}

// drain handles a stream's events until it ends or upd is settled, and
// reports whether it delivered any event.
func (r *reader) drain(ctx context.Context, s *Stream) (bool, error) {
	partial := map[string]bool{} // messages shown in part
	got := false
	for !r.upd.settled() {
		it, err := s.Next()
		if errors.Is(err, errSSETooLarge) {
			return got, err
		}
		if err != nil {
			// Poppy 0.1 §7.6: "After a reconnect, it drops any pieces of a
			// message it didn't receive in full."
			if len(partial) > 0 {
				r.o.progress(Progress{Interrupted: true})
			}
			return got, nil
		}
		if it.Delta != nil {
			// Poppy 0.1 §7.6: "It MUST NOT act on text from a text-delta
			// event": pieces are shown, never kept.
			partial[it.Delta.MessageID] = true
			r.o.progress(Progress{Delta: it.Delta})
			continue
		}
		got = true
		ev := *it.Event
		if ev.Message != nil {
			delete(partial, ev.Message.ID) // replaced by the complete message
		}
		before := r.upd.State
		if r.cursor, err = r.t.handle(ctx, r.id, []Event{ev}, it.Cursor, nil, r.upd); err != nil {
			return got, err
		}
		if r.upd.State != before {
			st := r.upd.State
			r.o.progress(Progress{State: &st})
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
func (r *reader) pace(ctx context.Context, start time.Time, wait time.Duration, news bool) {
	held := min(wait, r.t.c.opts.MaxWait) // what the request asked for
	if news || held <= 0 || r.upd.settled() || r.t.now().Sub(start) >= held/2 {
		return
	}
	sleep(ctx, min(time.Second, r.deadline.Sub(r.t.now())))
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
