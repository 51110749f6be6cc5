// This file is the Tracker's reading: JSON reads and streams from the
// saved cursor, has_more, expired cursors and reconnection, for one call at
// a time (a reader), within the call's limits. What is handled is recorded
// by records.go.

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
	// pages counts the requests made for events: pages and streams.
	pages int
	// handled counts the events handled, each a row in the store.
	handled int
}

// reader returns a reader of conversation id from cursor.
func (t *Tracker) reader(id, cursor string, deadline time.Time, o *ReadOptions, upd *Update) *reader {
	return &reader{t: t, id: id, cursor: cursor, deadline: deadline, o: o, upd: upd}
}

// waiting reports whether the wait goes on: the deadline is ahead.
func (r *reader) waiting() bool { return r.t.now().Before(r.deadline) }

// full reports whether the call has made as many requests, or handled as
// many events, as it may: a Company answering has_more forever, or
// streaming events without end, cannot keep a call running.
func (r *reader) full() bool {
	return r.pages >= r.t.opts.MaxPages || r.handled >= r.t.opts.MaxEvents
}

// follow reads the conversation until the wait is over: at once when first
// is set, again at once while has_more (§7.5: "When has_more is true, the
// Personal Agent reads again right away"), and then until upd is settled or
// the deadline passes, all within the call's limits. At a limit with
// has_more pending it stops and says more is waiting: the cursor is saved,
// and the next call goes on.
func (r *reader) follow(ctx context.Context) error {
	for r.first || r.hasMore || !r.upd.settled() && r.waiting() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("conversation: %w", err) // the caller gave up
		}
		if r.full() {
			r.upd.More = r.upd.More || r.hasMore
			return nil
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
	if r.o.Stream && r.upd.settled() && !r.upd.More {
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
	r.pages++
	p, err := r.t.c.Read(ctx, r.id, r.cursor, wait)
	if errors.Is(err, ErrCursorExpired) && r.cursor != "" {
		r.expired()
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

// page handles a page of events read, and reports whether it brought
// news: an event handled for the first time, or a page to read at once.
func (r *reader) page(ctx context.Context, p *Page) (bool, error) {
	fresh, err := r.take(ctx, p.Events, p.Cursor, &p.State)
	if err != nil {
		return false, err
	}
	r.hasMore = p.HasMore && !r.upd.More
	if r.hasMore && fresh == 0 && !r.waiting() {
		// Poppy 0.1 §7.5: "When has_more is true, the Personal Agent reads
		// again right away": within the wait. A page that brought nothing
		// new once the wait is over ends the call; the next one goes on.
		r.hasMore, r.upd.More = false, true
	}
	return r.hasMore || fresh > 0, nil
}

// take handles events up to the call's limit and saves the cursor after
// the last one handled (§7.5: "Each event's id is also a cursor"). Events
// past the limit are left for the next call, which More announces. It
// returns how many events were handled for the first time.
func (r *reader) take(ctx context.Context, events []Event, cursor string, state *State) (int, error) {
	if room := r.t.opts.MaxEvents - r.handled; len(events) > room {
		events, state = events[:max(room, 0)], nil // the answer's state is after events not handled
		cursor = r.cursor
		if len(events) > 0 {
			cursor = events[len(events)-1].ID
		}
		r.upd.More = true
	}
	r.handled += len(events)
	fresh, err := r.t.handle(ctx, r.id, events, cursor, state, r.upd)
	if err == nil {
		r.cursor = cursor
	}
	return fresh, err
}

// flush collects, without waiting, the events the Company already has once a
// streamed wait has settled. A stream is left at the first event that
// settles the wait, and what follows it at once (a person's message after
// the state event that announced them) belongs in the same result.
func (r *reader) flush(ctx context.Context) error {
	for hasMore := false; ; hasMore = true {
		if r.full() {
			r.upd.More = r.upd.More || hasMore
			return nil
		}
		r.pages++
		p, err := r.t.c.Read(ctx, r.id, r.cursor, 0)
		if err != nil {
			return err
		}
		fresh, err := r.take(ctx, p.Events, p.Cursor, &p.State)
		if err != nil || !p.HasMore || r.upd.More {
			return err
		}
		if fresh == 0 {
			r.upd.More = true // has_more with nothing new: the next call goes on
			return nil
		}
	}
}

// expired restarts reading from the beginning. Poppy 0.1 §7.5: "A cursor
// for events it no longer has returns cursor_expired. The Personal Agent
// then reads from the beginning and SHOULD tell the User that part of the
// conversation is missing."
func (r *reader) expired() {
	r.cursor, r.first = "", true
	r.upd.HistoryMissing = true
}

// stream follows the conversation over streams until upd is settled or the
// deadline passes, reconnecting whenever the Company closes one. A Company
// that answers with JSON instead gives a page, handled like a read's.
func (r *reader) stream(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, r.deadline.Sub(r.t.now()))
	defer cancel()
	resume := false
	for !r.upd.settled() && sctx.Err() == nil && !r.full() {
		start, wait := r.t.now(), r.deadline.Sub(r.t.now())
		r.pages++
		s, p, err := r.t.c.Subscribe(sctx, r.id, r.cursor, resume, wait)
		switch {
		case errors.Is(err, ErrCursorExpired) && r.cursor != "":
			r.expired()
			r.first, resume = false, false
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

// drain handles a stream's events until it ends, upd is settled or the
// call's limit is reached, and reports whether it delivered any event.
func (r *reader) drain(ctx context.Context, s *Stream) (bool, error) {
	shown := newPartials(&r.t.opts)
	got := false
	for !r.upd.settled() {
		if r.handled >= r.t.opts.MaxEvents {
			r.upd.More = true // the stream goes on without end: the next call continues
			return got, nil
		}
		it, err := s.Next()
		if errors.Is(err, errSSETooLarge) {
			return got, err
		}
		if err != nil {
			// Poppy 0.1 §7.6: "After a reconnect, it drops any pieces of a
			// message it didn't receive in full."
			if shown.any() {
				r.o.progress(Progress{Interrupted: true})
			}
			return got, nil
		}
		if it.Delta != nil {
			// Poppy 0.1 §7.6: "It MUST NOT act on text from a text-delta
			// event": pieces are shown, within bounds, and never kept.
			if shown.show(it.Delta) {
				r.o.progress(Progress{Delta: it.Delta})
			}
			continue
		}
		got = true
		ev := *it.Event
		if ev.Message != nil {
			shown.done(ev.Message.ID) // replaced by the complete message
		}
		before := r.upd.State
		if _, err := r.take(ctx, []Event{ev}, it.Cursor, nil); err != nil {
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

// The bounds of what one stream shows of messages being written (Poppy 0.1
// §7.6 text-delta events): a Company can send pieces without end, each for a
// new message, and nothing of them may grow with it.

// partials is what one stream has shown of messages being written: for at
// most MaxPartialMessages messages at once, at most MaxPieces pieces and
// MaxPieceBytes bytes of each. Pieces past a bound are not shown; the
// complete message comes in its event. It is not safe for concurrent use.
type partials struct {
	maxMessages, maxPieces, maxBytes int
	shown                            map[string]*partialShown
}

// partialShown counts what was shown of one message.
type partialShown struct{ pieces, bytes int }

func newPartials(o *TrackerOptions) *partials {
	return &partials{maxMessages: o.MaxPartialMessages, maxPieces: o.MaxPieces, maxBytes: o.MaxPieceBytes,
		shown: map[string]*partialShown{}}
}

// show reports whether the piece d may be shown, and counts it if so.
func (p *partials) show(d *TextDelta) bool {
	if !validID(d.MessageID) {
		return false // a piece of no message that can ever come whole
	}
	m := p.shown[d.MessageID]
	if m == nil {
		if len(p.shown) >= p.maxMessages {
			return false
		}
		m = &partialShown{}
		p.shown[d.MessageID] = m
	}
	if m.pieces >= p.maxPieces || m.bytes+len(d.Text) > p.maxBytes {
		return false
	}
	m.pieces++
	m.bytes += len(d.Text)
	return true
}

// done forgets a message that came whole.
func (p *partials) done(id string) { delete(p.shown, id) }

// any reports whether pieces of a message not yet whole were shown.
func (p *partials) any() bool { return len(p.shown) > 0 }
