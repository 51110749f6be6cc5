package tools

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// startSessionArgs are start_session's arguments.
type startSessionArgs struct {
	companyArgs
	New    bool       `json:"new,omitempty" jsonschema:"Start a fresh Session instead of reusing the current one"`
	Scopes *scopeList `json:"scopes,omitempty" jsonschema:"Narrow the signed-in Session to these scopes for a task (fewer than the sign-in granted); leave out for all of them"`
}

func (ss *sessions) startTool() tool {
	return newTool("start_session",
		"Open (or reuse) the user's Session with a Company: the Company then recognizes the same user across its APIs, "+
			"conversations and website. Starts signed in when poppy-mcp holds an Account Token. Other tools start one as needed.",
		annotations{title: "Start a Session", idempotent: true, openWorld: true},
		ss.start)
}

// sessionResult is start_session's structured content. It never holds a token.
type sessionResult struct {
	Domain    string   `json:"domain"`
	SessionID string   `json:"session_id"`
	SignedIn  bool     `json:"signed_in"`
	Scopes    []string `json:"scopes"`
	ExpiresAt string   `json:"expires_at"`
	// Notice tells what became of the Account Token held, when it was
	// refused (Poppy 0.1 §4.8: "The Session continues signed out").
	Notice string `json:"notice,omitempty"`
}

func (ss *sessions) start(ctx context.Context, _ mcp.CallToolRequest, args startSessionArgs) *mcp.CallToolResult {
	domain := args.Domain
	cs, co, sess, err := ss.session(ctx, domain, args.New)
	if err != nil {
		ss.log.WarnContext(ctx, "no Session", "domain", domain, "err", err.Error())
		return ss.failure(domain, err)
	}
	if args.Scopes != nil {
		if fail := ss.narrow(ctx, cs, co, sess, args.Scopes.sorted()); fail != nil {
			return fail
		}
	}
	info := sess.Info()
	res := sessionResult{Domain: co.Domain, SessionID: info.ID, SignedIn: info.SignedIn,
		Scopes: info.Scopes, ExpiresAt: info.ExpiresAt.UTC().Format(time.RFC3339)}
	if res.Scopes == nil {
		res.Scopes = []string{}
	}
	state := "signed out"
	if info.SignedIn {
		state = "signed in with scopes " + strings.Join(info.Scopes, " ")
	}
	ss.log.DebugContext(ctx, "session ready", "domain", res.Domain, "session_id", info.ID, "signed_in", info.SignedIn)
	res.Notice = cs.takeNotice()
	return result(res, "Session %s with %s is open, %s. poppy-mcp renews it by itself. %s", info.ID, res.Domain, state, res.Notice)
}

// failure phrases an error from getting a Session for the model, with what
// to do next. Errors from auth and discovery never carry secrets.
func (ss *sessions) failure(domain string, err error) *mcp.CallToolResult {
	var (
		refused *discovery.RefusedError
		inErr   *discovery.InputError
		wait    *auth.RetryAfterError
		aerr    *auth.Error
	)
	code, next := "session_failed", "Try again later."
	switch {
	case errors.Is(err, errNoIdentity):
		code, next = "no_identity", "Tell the user how to set up poppy-mcp's identity (see the message)."
	case errors.As(err, &inErr):
		code, next = "invalid_domain", "Give the domain alone, like example.com."
	case errors.As(err, &refused):
		code, next = "company_unusable", "This Company's documents break the protocol; it cannot be used."
	case errors.As(err, &wait), errors.Is(err, discovery.ErrRateLimited):
		code, next = "rate_limited", "Wait the time given, then call the tool again."
	case errors.As(err, &aerr):
		code = aerr.Code
	}
	ss.log.Info("no session", "domain", domain, "code", code, "err", err.Error())
	return failure(map[string]string{"error": code, "next": next}, "%v. %s", err, next)
}

// narrow gives the signed-in Session a token for fewer scopes than the
// Account Token has, or for all of them again when scopes is empty. Poppy
// 0.1 §4.8: "scope MAY ask for fewer scopes than the Account Token has, for
// example read-only access for a task that only looks things up. It can't
// ask for more."
func (ss *sessions) narrow(ctx context.Context, cs *companyState, co *discovery.Company, sess *auth.Session, scopes []string) *mcp.CallToolResult {
	domain := co.Domain
	err := sess.Narrow(ctx, scopes)
	switch {
	case errors.Is(err, auth.ErrNoAccountToken):
		return failure(map[string]string{"error": "not_signed_in"},
			"Scopes narrow a signed-in Session, and poppy-mcp holds no sign-in for %s. Sign in first (%s with domain %s).",
			domain, ss.choice.tool(co.Document.Auth, scopes), domain)
	case errors.Is(err, auth.ErrInvalidScope):
		var granted []string
		if acct, _ := sess.Held(ctx); acct != nil {
			granted = acct.Scopes()
		}
		return failure(map[string]any{"error": "scope_not_granted", "granted": granted},
			"The sign-in for %s granted %s, not all of %s: a Session cannot get more. Call %s with domain %s and those scopes to sign in for more.",
			domain, strings.Join(granted, " "), strings.Join(scopes, " "), ss.choice.tool(co.Document.Auth, scopes), domain)
	case err != nil:
		return ss.failure(domain, err)
	}
	ss.saveSignedIn(ctx, cs, sess) // under cs.mu, and only if sess is still cs's Session
	return nil
}
