// This file implements the Tracker: a User's conversations at one Company,
// followed through a Client with what must survive a restart kept in the
// store. Poppy 0.1 §7.5: "The Personal Agent handles events in order and
// saves the cursor after them. A read after a reconnect can return events
// again, so it skips event IDs it has already handled."

package conversation

import (
	"context"
	"errors"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// Owner is whose conversations a Tracker follows, and where (Poppy 0.1
// §7.2: "A conversation belongs to the Personal Agent's client_id and the
// User ID that started it").
type Owner struct {
	Issuer string // the Company's auth.issuer; required
	UserID string // the User's ID at the Company; required
	Domain string // the domain conversations are started at
}

// TrackerOptions configure NewTracker. A nil *TrackerOptions is the same as
// a zero TrackerOptions.
type TrackerOptions struct {
	// Now is the clock of waits and of pending messages' ages. Zero:
	// time.Now.
	Now func() time.Time

	// The limits of one call, so that a Company cannot keep it running or
	// make it hold more and more: one that answers has_more forever, or
	// streams events or pieces of messages without end.

	// MaxPages is the most requests for events one call makes: pages of
	// JSON and stream connections. Zero: 20.
	MaxPages int
	// MaxEvents is the most events one call handles, each a row in the
	// store and at most one event returned. Zero: 500.
	MaxEvents int
	// MaxPartialMessages is how many messages being written one stream
	// shows pieces of at once (§7.6 text-delta). Zero: 8.
	MaxPartialMessages int
	// MaxPieces and MaxPieceBytes bound what is shown of each such
	// message. Zero: 64 pieces, 16 KiB.
	MaxPieces, MaxPieceBytes int

	// PendingMaxAge is how long a message not known to be delivered (the
	// process stopped, the network failed) is sent again by the next call:
	// past it, the message is reported not sent and forgotten, so that an
	// answer such as "yes, pay" never arrives late. Zero: 10 minutes.
	PendingMaxAge time.Duration

	// Person says whose Tracker it is, for a Worker that sends the
	// messages it leaves pending: kept with each (sealed like the
	// message) and given back to WorkerOptions.Open. Empty: the one person
	// of a single-user deployment.
	Person string
}

// withDefaults fills the zero fields of o.
func (o TrackerOptions) withDefaults() TrackerOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxPages, 20)
	def(&o.MaxEvents, 500)
	def(&o.MaxPartialMessages, 8)
	def(&o.MaxPieces, 64)
	def(&o.MaxPieceBytes, 16<<10)
	if o.PendingMaxAge <= 0 {
		o.PendingMaxAge = 10 * time.Minute
	}
	return o
}

// Tracker follows one User's conversations at one Company. It keeps each
// conversation's cursor, state and handled events in the store, keyed by
// issuer and conversation ID, and each message not yet known to be
// delivered, so that another Tracker, in this process or after a restart,
// continues where it left off. It is safe for concurrent use. Calls on one
// conversation are serialized where they record what they handled, among
// the Trackers that share locks: a Tracker and those WithClient made from
// it. Keep one Tracker per Company and User for the life of the process,
// and make one WithClient for each Session.
type Tracker struct {
	c     *Client
	st    *store.Store
	owner Owner
	opts  TrackerOptions
	// locks serializes the handling of each conversation's events; shared
	// with the Trackers WithClient makes.
	locks *keyedMutex
}

// NewTracker returns a Tracker of owner's conversations through c, keeping
// its state in st.
func NewTracker(c *Client, st *store.Store, owner Owner, opts *TrackerOptions) (*Tracker, error) {
	if c == nil || st == nil || owner.Issuer == "" || owner.UserID == "" {
		return nil, errors.New("conversation: NewTracker needs a Client, a store, an issuer and a User ID")
	}
	t := &Tracker{c: c, st: st, owner: owner, locks: &keyedMutex{}}
	if opts != nil {
		t.opts = *opts
	}
	t.opts = t.opts.withDefaults()
	return t, nil
}

// WithClient returns a Tracker of the same conversations, sharing t's
// locks and options, that sends through c: the client of another Session
// (Poppy 0.1 §7.11: "A conversation isn't tied to one Session Token or
// Session").
func (t *Tracker) WithClient(c *Client) *Tracker {
	u := *t
	u.c = c
	return &u
}

func (t *Tracker) now() time.Time { return t.opts.Now() }

// ReadOptions say how long to follow a conversation and how.
type ReadOptions struct {
	// Wait is how long to wait for the Company: until it has said
	// something and is no longer working, or the conversation closed.
	// Zero: what is there now.
	Wait time.Duration
	// Stream asks the Company for a stream of events (Poppy 0.1 §7.6),
	// reconnecting when it closes one; a Company that does not stream
	// answers JSON, which is read as usual.
	Stream bool
	// Progress, if set, is told of what happens while waiting: pieces of
	// a message being written (show them, never act on them), state
	// changes, and streams broken in the middle of a message.
	Progress func(Progress)
}

// Progress is news while waiting.
type Progress struct {
	// Delta is a piece of a Company message being written (§7.6).
	Delta *TextDelta
	// State is the conversation's new state.
	State *State
	// Interrupted says a stream broke while a message was being written:
	// the pieces shown of it are void, and the message comes whole later.
	Interrupted bool
}

// Update is what a Tracker call found: the conversation's state and the
// events not handled before.
type Update struct {
	ConversationID string
	// ParentID is the parent of a Direct Conversation; "" for others.
	ParentID string
	State
	// Events are the new events, oldest first, each returned once across
	// every Tracker of the store. Events of unknown types are left out
	// (§7.5), as are the messages this agent sent, known by their IDs:
	// every message event here is the Company's, whatever role or sender
	// it claims.
	Events []Event
	// HistoryMissing says the Company no longer had the events after the
	// saved cursor: reading restarted from the beginning of what it keeps,
	// and part of the conversation may be missing (§7.5).
	HistoryMissing bool
	// More says the call stopped at one of its limits (TrackerOptions)
	// with events still waiting at the Company: what was read is here, the
	// cursor is saved after it, and the next call goes on.
	More bool
	// MessageID is the ID of the message sent, for Start and Send.
	MessageID string
	// Resent is what the call did first with the messages earlier calls
	// or processes left pending: sent again with their IDs, or given up.
	Resent []Resent
}

// settled reports whether a wait is over: the conversation is closed, or
// the Company is not working on more and has said something besides
// working or queued (a queued conversation waits for a person).
func (u *Update) settled() bool {
	if u.Status == StatusClosed {
		return true
	}
	if u.Status == StatusWorking {
		return false
	}
	for _, e := range u.Events {
		if e.Type != EventState || e.Status != StatusWorking && e.Status != StatusQueued {
			return true
		}
	}
	return false
}

// Start starts a conversation with m, or a Direct Conversation linked to
// parentID (Poppy 0.1 §7.10), and follows it for up to o.Wait. m.ID may be
// empty: the Tracker gives it one, the same one as a pending message with
// the same content.
func (t *Tracker) Start(ctx context.Context, m Message, parentID string, o *ReadOptions) (*Update, error) {
	if err := precheck(m); err != nil {
		return nil, err
	}
	resent, err := t.resendPending(ctx, t.pendingName("", parentID, m))
	if err != nil {
		return nil, err
	}
	return withResent(resent)(t.start(ctx, m, parentID, orDefault(o)))
}

func (t *Tracker) start(ctx context.Context, m Message, parentID string, o *ReadOptions) (*Update, error) {
	deadline := t.now().Add(o.Wait)
	snd, err := t.claimID(ctx, "", parentID, &m)
	if err != nil {
		return nil, err
	}
	p, err := t.c.Start(ctx, m, parentID, &SendOptions{Wait: o.Wait})
	t.settle(ctx, snd, err)
	if err != nil {
		return nil, t.failed(ctx, parentID, false, m.ID, err)
	}
	id := p.ConversationID
	if err := t.create(ctx, id, parentID, p.State); err != nil {
		return nil, err
	}
	upd := &Update{ConversationID: id, ParentID: parentID, State: p.State, MessageID: m.ID}
	return t.afterPost(ctx, upd, m.ID, p, "", deadline, o)
}

// Send sends m to a conversation and follows it for up to o.Wait, asking
// for the reply in the answer from the saved cursor (§7.3). m.ID may be
// empty, as for Start. A conversation the store does not know is adopted,
// read from its beginning, if the Company accepts the message.
func (t *Tracker) Send(ctx context.Context, conversationID string, m Message, o *ReadOptions) (*Update, error) {
	if err := precheck(m); err != nil {
		return nil, err
	}
	resent, err := t.resendPending(ctx, t.pendingName(conversationID, "", m))
	if err != nil {
		return nil, err
	}
	return withResent(resent)(t.send(ctx, conversationID, m, orDefault(o)))
}

func (t *Tracker) send(ctx context.Context, conversationID string, m Message, o *ReadOptions) (*Update, error) {
	deadline := t.now().Add(o.Wait)
	rec, adopted, err := t.load(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	snd, err := t.claimID(ctx, conversationID, "", &m)
	if err != nil {
		return nil, err
	}
	if err := t.markSent(ctx, conversationID, m.ID); err != nil {
		t.release(ctx, snd)
		return nil, err
	}
	cursor, expired := rec.Cursor, false
	p, err := t.c.Send(ctx, conversationID, m, &SendOptions{Wait: o.Wait, Cursor: cursor})
	if errors.Is(err, ErrCursorExpired) {
		// The message may be in: send it again, the same, without a read;
		// the Company recognizes it (§7.3). Then read from the beginning.
		cursor, expired = "", true
		p, err = t.c.Send(ctx, conversationID, m, nil)
	}
	t.settle(ctx, snd, err)
	if err != nil {
		return nil, t.failed(ctx, conversationID, adopted, m.ID, err)
	}
	upd := &Update{ConversationID: conversationID, ParentID: rec.ParentID, State: p.State,
		MessageID: m.ID, HistoryMissing: expired}
	return t.afterPost(ctx, upd, m.ID, p, cursor, deadline, o)
}

// afterPost records the message sent, handles the reply in the answer, and
// follows the conversation until the wait is over.
func (t *Tracker) afterPost(ctx context.Context, upd *Update, msgID string, p *Page, cursor string,
	deadline time.Time, o *ReadOptions) (*Update, error) {
	id := upd.ConversationID
	// A new conversation's ID is known only now, before any of its events
	// is read.
	if err := t.markSent(ctx, id, msgID); err != nil {
		return nil, err
	}
	r := t.reader(id, cursor, deadline, o, upd)
	r.first = o.Wait > 0
	if p.Read {
		r.pages++ // the POST was a read (§7.3 "Replies in the response")
		if _, err := r.page(ctx, p); err != nil {
			return nil, err
		}
		r.first = false
	} else if c, err := t.savedCursor(ctx, id); err == nil && !upd.HistoryMissing {
		r.cursor = c
	}
	return upd, r.follow(ctx)
}

// Read reads a conversation's new events, following it for up to o.Wait.
// A conversation the store does not know is adopted and read from its
// beginning, if the Company lets this User read it.
func (t *Tracker) Read(ctx context.Context, conversationID string, o *ReadOptions) (*Update, error) {
	resent, err := t.resendPending(ctx, "")
	if err != nil {
		return nil, err
	}
	return withResent(resent)(t.read(ctx, conversationID, orDefault(o)))
}

func (t *Tracker) read(ctx context.Context, conversationID string, o *ReadOptions) (*Update, error) {
	deadline := t.now().Add(o.Wait)
	rec, adopted, err := t.load(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	upd := &Update{ConversationID: conversationID, ParentID: rec.ParentID,
		State: State{Status: rec.Status, Responder: rec.Responder}}
	r := t.reader(conversationID, rec.Cursor, deadline, o, upd)
	r.first = true
	if err := r.follow(ctx); err != nil {
		return upd, t.failed(ctx, conversationID, adopted, "", err)
	}
	return upd, nil
}

// Handoff asks for a person at the Company (Poppy 0.1 §7.9).
func (t *Tracker) Handoff(ctx context.Context, conversationID string) (*Update, error) {
	resent, err := t.resendPending(ctx, "")
	if err != nil {
		return nil, err
	}
	return withResent(resent)(t.handoff(ctx, conversationID))
}

func (t *Tracker) handoff(ctx context.Context, conversationID string) (*Update, error) {
	rec, adopted, err := t.load(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	st, err := t.c.Handoff(ctx, conversationID)
	if err != nil {
		return nil, t.failed(ctx, conversationID, adopted, "", err)
	}
	return t.saveState(ctx, rec, st)
}

// Close closes a conversation (Poppy 0.1 §7.12), and with it, in the
// store, its open Direct Conversations: "Closing the parent also closes
// its open Direct Conversation." One the Company had closed already is
// reported closed.
func (t *Tracker) Close(ctx context.Context, conversationID string) (*Update, error) {
	resent, err := t.resendPending(ctx, "")
	if err != nil {
		return nil, err
	}
	return withResent(resent)(t.close(ctx, conversationID))
}

func (t *Tracker) close(ctx context.Context, conversationID string) (*Update, error) {
	rec, adopted, err := t.load(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	st, err := t.c.Close(ctx, conversationID)
	if errors.Is(err, ErrConversationClosed) {
		st, err = State{Status: StatusClosed, Responder: rec.Responder}, nil
	}
	if err != nil {
		return nil, t.failed(ctx, conversationID, adopted, "", err)
	}
	upd, err := t.saveState(ctx, rec, st)
	if err != nil {
		return nil, err
	}
	return upd, t.closeChildren(ctx, conversationID)
}

// withResent returns a function that adds resent to a call's outcome: to
// its Update, or to its error as a *ResentError, so that what became of
// pending messages is said whether the call succeeded or not.
func withResent(resent []Resent) func(*Update, error) (*Update, error) {
	return func(upd *Update, err error) (*Update, error) {
		if err != nil && len(resent) > 0 {
			err = &ResentError{Resent: resent, Err: err}
		}
		if upd != nil {
			upd.Resent = resent
		}
		return upd, err
	}
}

func orDefault(o *ReadOptions) *ReadOptions {
	if o == nil {
		return &ReadOptions{}
	}
	return o
}

// precheck validates m before an ID is claimed for it.
func precheck(m Message) error {
	if m.ID == "" {
		m.ID = "msg_check"
	}
	return m.check()
}

func sentMark(msgID string) string { return "sent:" + msgID }
