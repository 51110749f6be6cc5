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
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// signInArgs are the arguments of sign_in_device, sign_in_direct and
// sign_in_mediated.
type signInArgs struct {
	companyArgs
	Scopes scopeList `json:"scopes" schema:"minItems=1" jsonschema:"The scopes the task needs, from those discover_company lists for this sign-in type, e.g. [\"poppy:read\"]"`
}

// Sign-in statuses (docs/tools.md "Sign-in statuses").
const (
	statusPending  = "pending"
	statusComplete = "complete"
	statusDenied   = "denied"
	statusExpired  = "expired"
	statusFailed   = "failed"
)

// signIn is the sign-in capability (Poppy 0.1 §4.4-4.9): the latest
// sign-in of each Company, under way or finished, the sign-in tools, and the
// advice other tools give when a Company asks for a sign-in
// (signin_needed.go). It is safe for concurrent use.
type signIn struct {
	companies *companies
	sessions  *sessions
	choice    signInChoice
	noTools   bool              // the signin group is not served (toolsets.go): advice names no tool
	pages     *pages.Server     // the mediated and Direct Sign-In pages; nil: those tools say so
	mcp       *server.MCPServer // progress notifications while sign_in_status waits
	log       *slog.Logger
	now       func() time.Time
	metrics   *metrics.Recorder // device sign-ins polled; nil records nothing
}

// signInFlow is one sign-in, the latest of a person at a Company
// (agent.Company.SignIn): one person's sign-in never replaces, or answers
// for, another's. Fields above mu are set before it is shared.
type signInFlow struct {
	id      string // opaque: the MCP requestState and elicitationId
	kind    string // device, direct or mediated
	domain  string
	scopes  []string
	expires time.Time
	device  *auth.DeviceAuthorization // device: what the User needs
	direct  *auth.DirectSignIn        // direct: the URL and what the callback needs
	page    string                    // mediated: the local page's URL
	close   func()                    // stops the flow: polling or the page
	// callback takes a Direct Sign-In's callback request (signin_direct.go).
	callback func(w http.ResponseWriter, r *http.Request)

	done chan struct{} // closed when status leaves pending

	// mu guards everything below.
	mu      sync.Mutex
	status  string
	granted []string
	missing []string
	detail  string // why it did not complete, for the model: never a secret
}

func newFlow(kind, domain string, scopes []string) *signInFlow {
	b := make([]byte, 12)
	rand.Read(b)
	return &signInFlow{id: kind + "_" + base64.RawURLEncoding.EncodeToString(b), kind: kind, domain: domain,
		scopes: slices.Clone(scopes), status: statusPending, done: make(chan struct{}), close: func() {}}
}

// state returns the flow's status, granted and missing scopes, and detail.
func (f *signInFlow) state() (status string, granted, missing []string, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, slices.Clone(f.granted), slices.Clone(f.missing), f.detail
}

// end moves a pending flow to status; it reports false when it had already ended.
func (f *signInFlow) end(status string, granted, missing []string, detail string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status != statusPending {
		return false
	}
	f.status, f.granted, f.missing, f.detail = status, granted, missing, detail
	close(f.done)
	return true
}

// Pending reports whether the sign-in waits on the user (agent.SignIn).
func (f *signInFlow) Pending() bool { return isPending(f) }

// Stop ends a pending sign-in and stops its polling or page (agent.SignIn):
// the person is being forgotten, or the Server closes.
func (f *signInFlow) Stop() {
	if f.end(statusFailed, nil, nil, "The sign-in was stopped (poppy-mcp is shutting down).") {
		f.close()
	}
}

// current returns the latest sign-in of the Company cs is, or nil.
func (si *signIn) current(cs *agent.Company) *signInFlow {
	f, _ := cs.SignIn().(*signInFlow)
	return f
}

// replace makes f the sign-in of the Company cs is; one still pending is
// stopped first.
func (si *signIn) replace(cs *agent.Company, f *signInFlow) {
	old, _ := cs.SetSignIn(f).(*signInFlow)
	// The same sign-in pictured anew (taken over from another replica) is
	// not a newer one: its waiters read the new picture.
	if old != nil && old.id != f.id && old.end(statusFailed, nil, nil, "replaced by a newer sign-in") {
		old.close()
	}
}

// finish ends f with the outcome of its sign-in: on success the new
// Account Token is kept in place of the old one, which is revoked (Poppy 0.1
// §4.4: "The new Account Token replaces the old one, which the Personal Agent
// SHOULD revoke (4.9)"). A failed sign-in leaves the tokens held as they were
// (§4.4: "A pending or failed sign-in leaves existing tokens unchanged").
func (si *signIn) finish(ctx context.Context, cs *agent.Company, sess *auth.Session, f *signInFlow, in *auth.SignIn, err error) {
	if err != nil {
		status, detail := flowFailure(err)
		if f.end(status, nil, nil, detail) {
			si.log.InfoContext(ctx, "sign-in ended", "type", f.kind, "issuer", cs.Issuer(), "status", status, "err", err)
		}
		return
	}
	detail := ""
	var held *auth.HoldError
	if errors.As(sess.Hold(ctx, in), &held) {
		if held.Keep != nil {
			si.log.ErrorContext(ctx, "could not keep the Account Token", "issuer", cs.Issuer(), "err", held.Keep)
			detail = "poppy-mcp could not store the Account Token, so later Sessions will start signed out."
		}
		if held.Revoke != nil {
			si.log.WarnContext(ctx, "could not revoke the replaced Account Token", "issuer", cs.Issuer(), "err", held.Revoke)
		}
	}
	si.sessions.saveSignedIn(ctx, cs, sess)
	// Logged before the flow ends, so whoever reads it complete finds the lines.
	si.log.InfoContext(ctx, "signed in", "type", f.kind, "issuer", cs.Issuer(), "scopes", strings.Join(in.Scopes, " "))
	if extra := notRequested(in.Scopes, f.scopes); len(extra) > 0 {
		// Poppy 0.1 §4.4: "The Company MUST NOT grant scopes beyond those requested and allowed for the type used."
		si.log.WarnContext(ctx, "the Company granted scopes that were not requested", "issuer", cs.Issuer(),
			"requested", strings.Join(f.scopes, " "), "not_requested", strings.Join(extra, " "))
	}
	f.end(statusComplete, in.Scopes, in.Missing, detail)
}

// flowFailure maps a sign-in error to a status and a sentence for the model.
func flowFailure(err error) (status, detail string) {
	var ae *auth.Error
	switch {
	case errors.Is(err, auth.ErrAccessDenied):
		return statusDenied, "The user declined the sign-in."
	case errors.Is(err, auth.ErrExpiredToken):
		return statusExpired, "The sign-in expired before the user finished it."
	case errors.Is(err, auth.ErrAccountMismatch):
		// Poppy 0.1 §4.4: "A Session is signed in to at most one account."
		return statusFailed, "The Session had been signed in to another account, so poppy-mcp started a new Session: start the sign-in again."
	case errors.Is(err, context.Canceled):
		return statusFailed, "The sign-in was stopped (poppy-mcp is shutting down or a newer sign-in replaced it)."
	case errors.As(err, &ae):
		return statusFailed, "The Company refused the sign-in: " + companyWord(ae.Code) + "."
	}
	return statusFailed, "The sign-in failed: " + err.Error()
}

// offered returns the scopes a sign-in type of the Company can grant.
func offered(a *discovery.Auth, kind string) ([]string, bool) {
	switch {
	case a == nil:
	case kind == "device" && a.Device != nil:
		return a.Device.Scopes, true
	case kind == "direct" && a.Direct != nil:
		return a.Direct.Scopes, true
	case kind == "mediated" && a.Mediated != nil:
		return a.Mediated.Scopes, true
	}
	return nil, false
}

// checkScopes refuses scopes the sign-in type does not offer, with what to
// do instead. Poppy 0.1 §4.4: "Each type lists the scopes it can grant".
func (si *signIn) checkScopes(co *discovery.Company, kind, tool string, scopes []string) *mcp.CallToolResult {
	a := co.Document.Auth
	list, ok := offered(a, kind)
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
func (si *signIn) begin(ctx context.Context, req mcp.CallToolRequest, args signInArgs, kind, tool string) (start *signInStart, done *mcp.CallToolResult) {
	domain := args.Domain
	r, err := si.sessions.session(ctx, domain, false)
	if err != nil {
		return nil, si.sessions.failure(ctx, domain, err)
	}
	cs, co, sess := r.cs, r.co, r.sess
	if f, action := si.elicited(req, cs); f != nil {
		// Declined or not answered: the result is the one without
		// elicitation, the link and any code with it.
		return nil, si.flowResult(cs, f, action)
	}
	scopes := args.Scopes.sorted()
	if r := si.checkScopes(co, kind, tool, scopes); r != nil {
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
