// This file implements reading events (Poppy 0.1 §7.5): one read of JSON
// from a cursor, held up to a wait, and a stream of server-sent events
// (§7.6) that falls back to JSON when the Company does not stream.

package conversation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Read reads the events after cursor ("" from the beginning), holding for
// up to wait until there is one (Poppy 0.1 §7.5). An expired cursor gives
// an error matching ErrCursorExpired.
func (c *Client) Read(ctx context.Context, conversationID, cursor string, wait time.Duration) (*Page, error) {
	u, err := c.url(conversationID, "/events", cursor, wait)
	if err != nil {
		return nil, err
	}
	a, err := c.do(ctx, http.MethodGet, u, nil, wait)
	if err != nil {
		return nil, err
	}
	p, err := parsePage(a.body, cursor)
	if err != nil {
		return nil, err
	}
	p.Read = true
	if p.ConversationID == "" {
		p.ConversationID = conversationID
	}
	return p, nil
}

// Stream is an open stream of a conversation's events (Poppy 0.1 §7.6). It
// is not safe for concurrent use.
type Stream struct {
	body io.Closer
	sse  *sseReader
}

// StreamItem is what a stream delivers next: an event, or a piece of a
// message being written.
type StreamItem struct {
	// Event is an event of the conversation; nil for a text-delta.
	Event *Event
	// Cursor is where to resume after Event: its SSE id, or its own ID
	// when the stream gave none. Poppy 0.1 §7.6: "each event has its event
	// ID as the SSE id".
	Cursor string
	// Delta is a piece of text to show, never to act on; nil for an event.
	Delta *TextDelta
}

// Subscribe reads a conversation's events as a stream (Poppy 0.1 §7.6:
// "The Personal Agent asks for a stream by sending Accept:
// text/event-stream on a read"). The first connection reads after cursor;
// a reconnection sets resume, which sends the cursor as Last-Event-ID in
// its place. A Company that answers with JSON instead gives a Page and no
// Stream; wait is how long it may hold that read. The stream lasts until
// ctx ends, the Company closes it, or Close.
func (c *Client) Subscribe(ctx context.Context, conversationID, cursor string, resume bool, wait time.Duration) (*Stream, *Page, error) {
	qc := cursor
	if resume {
		qc = ""
	}
	u, err := c.url(conversationID, "/events", qc, wait)
	if err != nil {
		return nil, nil, err
	}
	resp, err := backoff.RetryWithData(func() (*http.Response, error) {
		resp, err := c.open(ctx, u, cursor, resume)
		if err != nil && !retryable(ctx, err) {
			return nil, backoff.Permanent(err)
		}
		return resp, err
	}, backoff.WithContext(c.opts.NewBackOff(), ctx))
	if err != nil {
		return nil, nil, err
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		return &Stream{body: resp.Body, sse: newSSEReader(resp.Body, c.opts.MaxEvent, c.opts.MaxEvent)}, nil, nil
	}
	// Poppy 0.1 §7.6: "A Company that doesn't stream returns JSON as usual."
	defer resp.Body.Close()
	p, err := c.readJSON(resp, cursor)
	if err != nil {
		return nil, nil, err
	}
	p.Read = true
	if p.ConversationID == "" {
		p.ConversationID = conversationID
	}
	return nil, p, nil
}

// open sends one request for a stream. A non-2xx answer is read and
// closed and becomes an *Error.
func (c *Client) open(ctx context.Context, u, cursor string, resume bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("conversation: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream, application/json;q=0.9")
	if resume && cursor != "" {
		// Poppy 0.1 §7.6: "The Personal Agent reconnects with Last-Event-ID
		// set to the last event it handled, in place of cursor."
		req.Header.Set("Last-Event-ID", cursor)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxBody))
	return nil, parseError(resp.StatusCode, resp.Header, b)
}

// readJSON reads a JSON page from a response.
func (c *Client) readJSON(resp *http.Response, cursor string) (*Page, error) {
	if !httpbody.IsJSON(resp.Header.Get("Content-Type")) {
		return nil, protocolErr("7.6", "a read answered with %s, neither a stream nor JSON", untrusted.Quote(resp.Header.Get("Content-Type"), 200))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("conversation: reading the answer: %w", err)
	}
	if int64(len(b)) > c.opts.MaxBody {
		return nil, protocolErr("7.5", "an answer larger than %d bytes", c.opts.MaxBody)
	}
	return parsePage(b, cursor)
}

// Next returns the next event or text piece. It returns io.EOF when the
// Company ended the stream; then reconnect with the last Cursor handled.
// Server-sent events that are neither text-delta nor a valid event are
// skipped.
func (s *Stream) Next() (StreamItem, error) {
	for {
		e, err := s.sse.Next()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return StreamItem{}, err
		}
		if e.Type == "text-delta" {
			// Poppy 0.1 §7.6: "the Company MAY send pieces of its text as
			// text-delta events, with no SSE id"
			if d, ok := parseTextDelta(e.Data); ok {
				return StreamItem{Delta: &d}, nil
			}
			continue
		}
		ev, err := parseEvent([]byte(e.Data))
		if err != nil {
			continue
		}
		cursor := ev.ID
		if e.HasID && validID(e.ID) {
			cursor = e.ID
		}
		return StreamItem{Event: &ev, Cursor: cursor}, nil
	}
}

// Retry returns the reconnection time the stream set, or zero.
func (s *Stream) Retry() time.Duration { return s.sse.retry }

// Close closes the stream.
func (s *Stream) Close() error { return s.body.Close() }
