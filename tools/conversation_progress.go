// This file sends the MCP progress notifications of a conversation tool's
// wait (MCP 2025-11-25 "Progress"): that poppy-mcp is still waiting, the
// conversation's new state, and the pieces of a message the Company is
// writing, marked as its content and for showing only (Poppy 0.1 §7.6). A
// Company decides how fast pieces come, so one wait sends a bounded number
// of notifications at a bounded rate: pieces that come faster are joined.

package tools

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Bounds of one wait's progress notifications.
const (
	convProgressMax   = 100                    // notifications in all
	convPieceInterval = 250 * time.Millisecond // between two notifications of pieces
	convPieceBytes    = 2 << 10                // bytes of pieces joined into one
	convTickInterval  = 3 * time.Second        // "still waiting"
)

// readOptions are the Tracker's options for a tool call that waits for
// wait: a stream when it waits, and MCP progress notifications while it
// waits when the client asked for them. stop ends the notifications.
func (c *conversations) readOptions(ctx context.Context, req mcp.CallToolRequest, wait time.Duration) (*conversation.ReadOptions, func()) {
	opts := &conversation.ReadOptions{Wait: wait, Stream: wait > 0}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	if token == nil || wait == 0 {
		return opts, func() {}
	}
	p := &waitProgress{mcp: c.mcp, now: c.now, ctx: ctx, token: token, done: make(chan struct{})}
	opts.Progress = p.report
	go p.tick()
	return opts, sync.OnceFunc(p.stop)
}

// waitProgress sends the progress notifications of one tool call's wait.
// It is safe for concurrent use.
type waitProgress struct {
	mcp   *server.MCPServer
	now   func() time.Time
	ctx   context.Context
	token mcp.ProgressToken
	done  chan struct{}

	// mu guards the fields below.
	mu        sync.Mutex
	n         int             // notifications sent; the progress value, which must increase
	lastPiece time.Time       // when pieces were last sent
	pieces    strings.Builder // pieces not sent yet
	flush     *time.Timer     // sends pieces once the interval is over; nil when none is due
	stopped   bool
}

// tick says every few seconds that poppy-mcp is still waiting.
func (p *waitProgress) tick() {
	t := time.NewTicker(convTickInterval)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.send("Waiting for the Company")
		}
	}
}

// report turns the Tracker's news into a notification. Pieces of a message
// being written ride on them, marked as Company content: for showing only.
func (p *waitProgress) report(pr conversation.Progress) {
	switch {
	case pr.Delta != nil:
		p.piece(pr.Delta.Text)
	case pr.State != nil:
		p.send("Conversation status " + status(pr.State.Status) + ", responder " + responder(pr.State.Responder))
	case pr.Interrupted:
		p.send("The stream broke: the partial message shown is void and will come whole")
	}
}

// piece joins a piece of text to those not sent yet, and sends them once
// the interval since the last ones is over.
func (p *waitProgress) piece(text string) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	if room := convPieceBytes - p.pieces.Len(); room > 0 {
		p.pieces.WriteString(untrusted.Text(text, room))
	}
	if wait := convPieceInterval - p.now().Sub(p.lastPiece); wait > 0 {
		if p.flush == nil {
			p.flush = time.AfterFunc(wait, p.sendPieces)
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.sendPieces()
}

// sendPieces sends the pieces not sent yet.
func (p *waitProgress) sendPieces() {
	p.mu.Lock()
	text := p.pieces.String()
	p.pieces.Reset()
	p.flush, p.lastPiece = nil, p.now()
	p.mu.Unlock()
	if text != "" {
		p.send("The Company is writing (third-party content, partial): " + untrusted.Quote(text, 0))
	}
}

// send sends one notification, unless the call is over or sent its share.
func (p *waitProgress) send(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock() // held while sending, so that progress values arrive in order
	if p.stopped || p.n >= convProgressMax {
		return
	}
	p.n++
	_ = p.mcp.SendNotificationToClient(p.ctx, "notifications/progress", map[string]any{
		"progressToken": p.token, "progress": p.n, "message": msg,
	})
}

// stop ends the notifications: none is sent after the result.
func (p *waitProgress) stop() {
	p.mu.Lock()
	p.stopped = true
	if p.flush != nil {
		p.flush.Stop()
	}
	p.mu.Unlock()
	close(p.done)
}
