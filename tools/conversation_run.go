// This file holds the conversation tools' handlers: each finds the
// conversation's Company, runs the Tracker call, answers authorization
// requests with a held Account Token when one covers them (Poppy 0.1
// §7.11), and phrases the outcome for the model.

package tools

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
)

func (c *conversations) sendMessage(ctx context.Context, req mcp.CallToolRequest, args sendMessageArgs) *mcp.CallToolResult {
	m, err := args.message()
	if err != nil {
		return failure(map[string]string{"error": "invalid_arguments"}, "%v.", err)
	}
	wait := args.WaitSeconds.duration(convDefaultSendWait, convMaxWait)
	if args.ConversationID != "" {
		on := conversationArgs{ConversationID: args.ConversationID, Domain: args.Domain}
		return c.onID(ctx, req, on, wait, func(t *convTarget, id string, o *conversation.ReadOptions) (*conversation.Update, error) {
			return t.tracker.Send(ctx, id, m, o)
		})
	}
	t, fail := c.target(ctx, args.Domain)
	if fail != nil {
		return fail
	}
	opts, stop := c.readOptions(ctx, req, wait)
	defer stop()
	return t.run(ctx, "", opts, func() (*conversation.Update, error) { return t.tracker.Start(ctx, m, "", opts) })
}

func (c *conversations) readEvents(ctx context.Context, req mcp.CallToolRequest, args readEventsArgs) *mcp.CallToolResult {
	wait := args.WaitSeconds.duration(convDefaultReadWait, convMaxWait)
	return c.onID(ctx, req, args.conversationArgs, wait, func(t *convTarget, id string, o *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Read(ctx, id, o)
	})
}

func (c *conversations) requestHuman(ctx context.Context, req mcp.CallToolRequest, args conversationArgs) *mcp.CallToolResult {
	return c.onID(ctx, req, args, -1, func(t *convTarget, id string, _ *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Handoff(ctx, id)
	})
}

func (c *conversations) startDirect(ctx context.Context, req mcp.CallToolRequest, args startDirectArgs) *mcp.CallToolResult {
	if args.Text == "" {
		return failure(map[string]string{"error": "invalid_arguments"}, "Give the user's first message as text.")
	}
	// Poppy 0.1 §7.10: "The Personal Agent sends the User's messages as written, with sender: "human""
	m := conversation.Message{Sender: conversation.SenderHuman, Text: args.Text}
	parent := conversationArgs{ConversationID: args.ConversationID, Domain: args.Domain}
	wait := args.WaitSeconds.duration(convDefaultSendWait, convMaxWait)
	return c.onID(ctx, req, parent, wait, func(t *convTarget, parent string, o *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Start(ctx, m, parent, o)
	})
}

func (c *conversations) close(ctx context.Context, req mcp.CallToolRequest, args conversationArgs) *mcp.CallToolResult {
	return c.onID(ctx, req, args, -1, func(t *convTarget, id string, _ *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Close(ctx, id)
	})
}

// convOp is one Tracker call on a conversation.
type convOp func(t *convTarget, id string, opts *conversation.ReadOptions) (*conversation.Update, error)

// onID runs op on the conversation args name, waiting for wait; a
// negative wait means op does not wait.
func (c *conversations) onID(ctx context.Context, req mcp.CallToolRequest, args conversationArgs, wait time.Duration, op convOp) *mcp.CallToolResult {
	id := args.ConversationID
	t, fail := c.byID(ctx, id, args.Domain)
	if fail != nil {
		return fail
	}
	var opts *conversation.ReadOptions
	if wait >= 0 {
		var stop func()
		opts, stop = c.readOptions(ctx, req, wait)
		defer stop()
	}
	return t.run(ctx, id, opts, func() (*conversation.Update, error) { return op(t, id, opts) })
}

// run runs op on conversation id and phrases its outcome.
func (t *convTarget) run(ctx context.Context, id string, opts *conversation.ReadOptions, op func() (*conversation.Update, error)) *mcp.CallToolResult {
	upd, err := t.do(ctx, op)
	if err != nil {
		return t.failure(id, err)
	}
	return t.result(ctx, upd, opts)
}

// do runs op once more after signing the Session in with a held Account
// Token, when op failed for want of a sign-in the token covers (Poppy 0.1
// §7.11: "The Personal Agent responds as it would to that error, with its
// Account Token (4.8) or by signing in (4.4)").
func (t *convTarget) do(ctx context.Context, op func() (*conversation.Update, error)) (*conversation.Update, error) {
	upd, err := op()
	var ae *auth.Error
	if errors.As(err, &ae) && (ae.Is(auth.ErrSignInRequired) || ae.Is(auth.ErrInsufficientScope)) &&
		t.signInHeld(ctx, askedScopes(ae.Scope)) {
		upd, err = op()
	}
	return upd, err
}

// askedScopes are the scopes an authorization request names; a bare
// sign_in_required asks for reading the account, the least a task needs.
func askedScopes(scope string) []string {
	if f := strings.Fields(scope); len(f) > 0 {
		return f
	}
	return []string{"poppy:read"}
}

// signInHeld makes the Session signed in with scopes, using the Account
// Token held when it covers them. It reports whether the Session has them
// now.
func (t *convTarget) signInHeld(ctx context.Context, scopes []string) bool {
	if err := t.sess.SignInHeld(ctx, scopes); err != nil {
		if !errors.Is(err, auth.ErrNoAccountToken) {
			t.c.log.InfoContext(ctx, "could not sign in with the held Account Token", "issuer", t.cs.Issuer(), "err", err)
		}
		return false
	}
	t.c.sessions.saveSignedIn(ctx, t.cs, t.sess)
	return true
}

// continueText is what poppy-mcp says when it has answered an
// authorization request by itself, so the Company Agent goes on.
const continueText = "The user is signed in now with the access you asked for. Please continue."

// answerAuthorization answers the first authorization event of upd with
// the held Account Token when it covers the scopes, and continues the
// conversation signed in (Poppy 0.1 §7.11: "It then continues the same
// conversation with the new token"). It reports the event answered.
func (t *convTarget) answerAuthorization(ctx context.Context, upd *conversation.Update, opts *conversation.ReadOptions) (answered string) {
	i := -1
	for j, e := range upd.Events {
		if e.Type == conversation.EventAuthorization {
			i = j
			break
		}
	}
	if i < 0 || upd.Status == conversation.StatusClosed || !t.signInHeld(ctx, askedScopes(upd.Events[i].Scope)) {
		return ""
	}
	more, err := t.tracker.Send(ctx, upd.ConversationID, conversation.Message{Sender: conversation.SenderAgent, Text: continueText}, opts)
	if err != nil {
		t.c.log.InfoContext(ctx, "could not continue the conversation after signing in", "issuer", t.cs.Issuer(), "err", err)
		return ""
	}
	upd.Events = append(upd.Events, more.Events...)
	upd.State, upd.HistoryMissing = more.State, upd.HistoryMissing || more.HistoryMissing
	return upd.Events[i].ID
}
