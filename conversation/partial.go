// This file bounds what one stream shows of messages being written (Poppy
// 0.1 §7.6 text-delta events): a Company can send pieces without end, each
// for a new message, and nothing of them may grow with it.

package conversation

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
