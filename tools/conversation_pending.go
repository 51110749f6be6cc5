package tools

// This file sends the messages left pending (a send_message whose answer
// never came: a network fault, a 5xx, a replica that died mid-send) in
// the background, for every person, whether or not they call again
// (conversation.Worker): each through a Session of the person it is for,
// opened as their own call would open it, even when the person has been
// forgotten (evicted) or was never seen by this replica. The person's next
// conversation call at that Company reports what became of it.

import (
	"context"
	"errors"
	"time"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// errUnknownPerson is why a pending message whose record names no person
// of its local user is not sent by the Worker (the person's own calls
// still send it).
var errUnknownPerson = errors.New("tools: the pending message is of an unknown person")

// sendPending returns the background work that sends pending messages,
// sweeping every sweep (zero: conversation.Worker's default), until its
// context ends.
func (c *conversations) sendPending(sweep time.Duration) func(ctx context.Context) {
	return func(ctx context.Context) {
		w, err := conversation.NewWorker(c.sessions.store, &conversation.WorkerOptions{Open: c.openPending, Sweep: sweep, Logger: c.log})
		if err != nil {
			c.log.Warn("pending messages are sent only by their person's next call", "err", err)
			return
		}
		w.Run(ctx)
	}
}

// openPending returns the Tracker of owner's conversations of the person
// the local user key and person (agent.OwnerOf) name, through their
// Session with the Company at owner's domain, started or resumed as their
// call would (conversation.WorkerOptions.Open); done ends the hold that
// keeps the person from being forgotten meanwhile.
func (c *conversations) openPending(ctx context.Context, key, person string, owner conversation.Owner) (*conversation.Tracker, func(), error) {
	pctx, ok := agent.ForOwner(ctx, key, person)
	if !ok {
		return nil, nil, errUnknownPerson
	}
	user, _ := mcpauth.UserFrom(pctx)
	done := c.sessions.people.hold(user)
	r, err := c.sessions.session(pctx, owner.Domain, false)
	var tr *conversation.Tracker
	if err == nil {
		tr, err = trackerAt(r)
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return tr, done, nil
}
