// This file holds the conversation tools' handlers: each resolves the
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

func (s *Server) sendMessage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	domain, id := stringArg(req, "domain"), stringArg(req, "conversation_id")
	m, err := convMessage(req)
	if err != nil {
		return failure(map[string]string{"error": "invalid_arguments"}, "%v.", err), nil
	}
	if id != "" {
		return s.convOnID(ctx, req, convDefaultSendWait, func(t *convTarget, id string, o *conversation.ReadOptions) (*conversation.Update, error) {
			return t.tracker.Send(ctx, id, m, o)
		}), nil
	}
	t, fail := s.convFor(ctx, domain)
	if fail != nil {
		return fail, nil
	}
	opts, stop := s.convReadOptions(ctx, req, convDefaultSendWait)
	defer stop()
	return s.convRun(ctx, t, "", opts, func() (*conversation.Update, error) { return t.tracker.Start(ctx, m, "", opts) }), nil
}

func (s *Server) readEvents(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.convOnID(ctx, req, convDefaultReadWait, func(t *convTarget, id string, o *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Read(ctx, id, o)
	}), nil
}

func (s *Server) requestHuman(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.convOnID(ctx, req, -1, func(t *convTarget, id string, _ *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Handoff(ctx, id)
	}), nil
}

func (s *Server) startDirect(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text := stringArg(req, "text")
	if text == "" {
		return failure(map[string]string{"error": "invalid_arguments"}, "Give the user's first message as text."), nil
	}
	// Poppy 0.1 §7.10: "The Personal Agent sends the User's messages as written, with sender: "human""
	m := conversation.Message{Sender: conversation.SenderHuman, Text: text}
	return s.convOnID(ctx, req, convDefaultSendWait, func(t *convTarget, parent string, o *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Start(ctx, m, parent, o)
	}), nil
}

func (s *Server) closeConversation(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.convOnID(ctx, req, -1, func(t *convTarget, id string, _ *conversation.ReadOptions) (*conversation.Update, error) {
		return t.tracker.Close(ctx, id)
	}), nil
}

// convOp is one Tracker call on a conversation.
type convOp func(t *convTarget, id string, opts *conversation.ReadOptions) (*conversation.Update, error)

// convOnID runs op on the conversation req's conversation_id names (with
// the optional domain), waiting as wait_seconds says with defWait as its
// default; a negative defWait means op does not wait.
func (s *Server) convOnID(ctx context.Context, req mcp.CallToolRequest, defWait time.Duration, op convOp) *mcp.CallToolResult {
	id := stringArg(req, "conversation_id")
	t, fail := s.convByID(ctx, id, stringArg(req, "domain"))
	if fail != nil {
		return fail
	}
	var opts *conversation.ReadOptions
	if defWait >= 0 {
		var stop func()
		opts, stop = s.convReadOptions(ctx, req, defWait)
		defer stop()
	}
	return s.convRun(ctx, t, id, opts, func() (*conversation.Update, error) { return op(t, id, opts) })
}

// convRun runs op and phrases its outcome.
func (s *Server) convRun(ctx context.Context, t *convTarget, id string, opts *conversation.ReadOptions, op func() (*conversation.Update, error)) *mcp.CallToolResult {
	upd, err := s.convDo(ctx, t, op)
	if err != nil {
		return s.convFailure(t, id, err)
	}
	return s.convResult(ctx, t, upd, opts)
}

// convDo runs op once more after signing the Session in with a held
// Account Token, when op failed for want of a sign-in the token covers
// (Poppy 0.1 §7.11: "The Personal Agent responds as it would to that
// error, with its Account Token (4.8) or by signing in (4.4)").
func (s *Server) convDo(ctx context.Context, t *convTarget, op func() (*conversation.Update, error)) (*conversation.Update, error) {
	upd, err := op()
	var ae *auth.Error
	if errors.As(err, &ae) && (ae.Is(auth.ErrSignInRequired) || ae.Is(auth.ErrInsufficientScope)) &&
		s.convSignInHeld(ctx, t, convScopes(ae.Scope)) {
		upd, err = op()
	}
	return upd, err
}

// convScopes are the scopes an authorization request names; a bare
// sign_in_required asks for reading the account, the least a task needs.
func convScopes(scope string) []string {
	if f := strings.Fields(scope); len(f) > 0 {
		return f
	}
	return []string{"poppy:read"}
}

// convSignInHeld makes the Session signed in with scopes, using the
// Account Token held when it covers them. It reports whether the Session
// has them now.
func (s *Server) convSignInHeld(ctx context.Context, t *convTarget, scopes []string) bool {
	if err := t.sess.SignInHeld(ctx, scopes); err != nil {
		if !errors.Is(err, auth.ErrNoAccountToken) {
			s.log.Info("could not sign in with the held Account Token", "issuer", t.cs.issuer, "err", err)
		}
		return false
	}
	s.sessions.saveSignedIn(ctx, t.cs, t.sess)
	return true
}

// convContinueText is what poppy-mcp says when it has answered an
// authorization request by itself, so the Company Agent goes on.
const convContinueText = "The user is signed in now with the access you asked for. Please continue."

// convAnswerAuthorization answers the first authorization event of upd with
// the held Account Token when it covers the scopes, and continues the
// conversation signed in (Poppy 0.1 §7.11: "It then continues the same
// conversation with the new token"). It reports the event answered.
func (s *Server) convAnswerAuthorization(ctx context.Context, t *convTarget, upd *conversation.Update, opts *conversation.ReadOptions) (answered string) {
	i := -1
	for j, e := range upd.Events {
		if e.Type == conversation.EventAuthorization {
			i = j
			break
		}
	}
	if i < 0 || upd.Status == conversation.StatusClosed || !s.convSignInHeld(ctx, t, convScopes(upd.Events[i].Scope)) {
		return ""
	}
	more, err := t.tracker.Send(ctx, upd.ConversationID, conversation.Message{Sender: conversation.SenderAgent, Text: convContinueText}, opts)
	if err != nil {
		s.log.Info("could not continue the conversation after signing in", "issuer", t.cs.issuer, "err", err)
		return ""
	}
	upd.Events = append(upd.Events, more.Events...)
	upd.State, upd.HistoryMissing = more.State, upd.HistoryMissing || more.HistoryMissing
	return upd.Events[i].ID
}
