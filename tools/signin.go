package tools

// This file holds what the sign-in tools share (Poppy 0.1 §4.4-4.9): the
// sign-in under way or finished for each Company, how a finished one ends
// (auth holds its Account Token in place of the old one, which it revokes),
// and the checks before a new sign-in (a held Account Token that covers the
// scopes is used instead). The Account Token policy itself is auth's
// (Agent.Open, Session.SignInHeld, Session.Hold); these phrase its results.
// The tools are in signin_device.go, signin_direct.go, signin_mediated.go,
// signin_status.go and signin_out.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// signInArgs are the arguments of sign_in_device, sign_in_direct and
// sign_in_mediated.
type signInArgs struct {
	companyArgs
	Scopes scopeList `json:"scopes" schema:"minItems=1" jsonschema:"The scopes the task needs, from those discover_company lists for this sign-in type, e.g. [\"poppy:read\"]"`
}

// Sign-in statuses (docs/tools.md "Sign-in statuses"), auth's.
const (
	statusPending  = auth.FlowPending
	statusComplete = auth.FlowComplete
	statusDenied   = auth.FlowDenied
	statusExpired  = auth.FlowExpired
	statusFailed   = auth.FlowFailed
)

// signIn is the sign-in capability (Poppy 0.1 §4.4-4.9): the sign-in
// tools, which start and read each person's sign-ins (auth.SignIns, of
// the person's agent.Person), and the advice other tools give when a
// Company asks for a sign-in (signin_needed.go). It is safe for
// concurrent use.
type signIn struct {
	companies *companies
	sessions  *sessions
	choice    signInChoice
	noTools   bool              // the signin group is not served (toolsets.go): advice names no tool
	pages     *pages.Server     // the mediated and Direct Sign-In pages; nil: those tools say so
	mcp       *server.MCPServer // progress notifications while sign_in_status waits
	log       *slog.Logger
	now       func() time.Time
}

// current returns the latest sign-in of the Company cs is, or nil.
func (si *signIn) current(cs *agent.Company) *auth.Flow { return cs.SignIn() }

// replace makes f the sign-in of the Company cs is; one still pending is
// stopped first.
func (si *signIn) replace(cs *agent.Company, f *auth.Flow) {
	cs.Person().SignIns().Replace(cs.Issuer(), f)
}

// finish ends f with the outcome of its sign-in (auth.SignIns.Finish).
func (si *signIn) finish(ctx context.Context, cs *agent.Company, sess *auth.Session, f *auth.Flow, in *auth.SignIn, err error) {
	cs.Person().SignIns().Finish(ctx, cs.Issuer(), sess, f, in, err)
}

// signInTool is the MCP half of one sign-in kind (auth.Kinds has the
// protocol half): the tool that offers it and how that tool is built.
type signInTool struct {
	kind  auth.Kind
	name  string
	build func(si *signIn) tool
}

// signInToolTable is the one table of the sign-in tools, a row per kind,
// in auth.Kinds' order.
func signInToolTable() []signInTool {
	return []signInTool{
		{auth.KindDevice, "sign_in_device", (*signIn).deviceTool},
		{auth.KindDirect, "sign_in_direct", (*signIn).directTool},
		{auth.KindMediated, "sign_in_mediated", (*signIn).mediatedTool},
	}
}

// toolOf is the tool that offers the sign-in kind.
func toolOf(kind auth.Kind) string {
	for _, t := range signInToolTable() {
		if t.kind == kind {
			return t.name
		}
	}
	return ""
}

// kindTools are the sign-in tools, built.
func (si *signIn) kindTools() []tool {
	table := signInToolTable()
	out := make([]tool, 0, len(table))
	for _, t := range table {
		out = append(out, t.build(si))
	}
	return out
}

// checkScopes refuses scopes the sign-in type does not offer, with what to
// do instead. Poppy 0.1 §4.4: "Each type lists the scopes it can grant".
func (si *signIn) checkScopes(co *discovery.Company, kind auth.Kind, scopes []string) *mcp.CallToolResult {
	a, tool := co.Document.Auth, toolOf(kind)
	list, ok := kind.Offered(a)
	if len(scopes) == 0 {
		return failure(map[string]any{"error": "scopes_required", "offered": list},
			"%s needs scopes, e.g. %q; %s offers the scopes of %s. Call it again with them.", tool, "poppy:read", co.Domain, companyWord(strings.Join(list, " ")))
	}
	var missing []string
	for _, sc := range scopes {
		if !slices.Contains(list, sc) {
			missing = append(missing, sc)
		}
	}
	if ok && len(missing) == 0 {
		return nil
	}
	next := si.choice.tool(a, scopes)
	msg := fmt.Sprintf("%s does not offer %s sign-in for %s.", co.Domain, kind, strings.Join(missing, " "))
	if !ok {
		msg = fmt.Sprintf("%s does not offer %s sign-in.", co.Domain, kind)
	}
	if next != "" && next != tool {
		msg += fmt.Sprintf(" Call %s with domain %s and scopes %s instead.", next, co.Domain, strings.Join(scopes, " "))
	} else {
		msg += " Ask for scopes it offers, of " + companyWord(strings.Join(list, " ")) + "."
	}
	return failure(map[string]any{"error": "scope_not_offered", "offered": list, "tool": next}, "%s", msg)
}

// alreadyCovered signs the Session in without a new sign-in when a held
// Account Token covers the scopes (Poppy 0.1 §4.4: "Before starting a new
// sign-in, the Personal Agent SHOULD check whether it already holds an
// Account Token that covers the task (4.8)"). auth confirms it with the
// Company, so a Session that only seems signed in (the User disconnected
// poppy-mcp, §4.9) gets a real sign-in. It returns the result to give, or
// nil to go on with a new sign-in.
func (si *signIn) alreadyCovered(ctx context.Context, cs *agent.Company, sess *auth.Session, domain string, scopes []string) *mcp.CallToolResult {
	before := sess.Info()
	err := sess.SignInHeld(ctx, scopes)
	switch {
	case errors.Is(err, auth.ErrNoAccountToken):
		return nil // a new sign-in follows
	case errors.Is(err, auth.ErrAccountTokenRefused):
		si.log.InfoContext(ctx, "the held Account Token was refused", "issuer", cs.Issuer())
		return nil
	case err != nil:
		return si.sessions.failure(ctx, domain, err)
	}
	si.sessions.saveSignedIn(ctx, cs, sess)
	info := sess.Info()
	res := statusResult{Domain: domain, Status: statusComplete, SignedIn: true, Scopes: info.Scopes, Missing: []string{}, SessionID: info.ID,
		Next: "Go on with the task."}
	if before.SignedIn && covers(before.Scopes, scopes) {
		return result(res, "Already signed in to %s with %s. Go on with the task.", domain, strings.Join(info.Scopes, " "))
	}
	res.Next = "Go on with the task: no sign-in was needed."
	return result(res, "poppy-mcp already holds an Account Token for %s covering %s, so the Session is signed in with it: no sign-in needed. Go on with the task.",
		domain, strings.Join(scopes, " "))
}

// signInStart is what a sign-in tool starts from: the Company's state and
// Session, the documents of the domain the tool was given (Poppy 0.1 §3.2:
// the Session is the Company's, the endpoints the domain's), and the scopes
// asked for.
type signInStart struct {
	cs     *agent.Company
	co     *discovery.Company
	sess   *auth.Session
	scopes []string
}

// beginSignIn is how every sign-in tool starts: the Session, the answer to
// a URL elicitation of its flow (a retried call), the scopes checked against
// what the type offers, and a held Account Token or signed-in Session that
// makes a new sign-in needless. done is the result to give at once, if any.
func (si *signIn) begin(ctx context.Context, req mcp.CallToolRequest, args signInArgs, kind auth.Kind) (start *signInStart, done *mcp.CallToolResult) {
	domain := args.Domain
	r, err := si.sessions.session(ctx, domain, false)
	if err != nil {
		return nil, si.sessions.failure(ctx, domain, err)
	}
	cs, co, sess := r.cs, r.co, r.sess
	if f, action := si.elicited(ctx, req, cs); f != nil {
		// Declined or not answered: the result is the one without
		// elicitation, the link and any code with it.
		return nil, si.flowResult(cs, f, action)
	}
	scopes := args.Scopes.sorted()
	if r := si.checkScopes(co, kind, scopes); r != nil {
		return nil, r
	}
	if r := si.alreadyCovered(ctx, cs, sess, domain, scopes); r != nil {
		return nil, r
	}
	return &signInStart{cs: cs, co: co, sess: sess, scopes: scopes}, nil
}

// covers reports whether have holds every scope of want.
func covers(have, want []string) bool {
	for _, sc := range want {
		if !slices.Contains(have, sc) {
			return false
		}
	}
	return true
}
