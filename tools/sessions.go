package tools

// This file is the sessions capability: the state the tools keep for each
// Company, its one Session (Poppy 0.1 §4.2, §3.2), the Session hooks that
// run once a Session exists, and start_session.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// sessions is the sessions capability: each person's Session with each
// Company they use, kept by the person (agent.Person, from the people
// registry) in auth.Sessions. Everything a person has at a Company is
// theirs alone: a hosted poppy-mcp serves several people, each a local
// user (mcpauth.KeyFrom of the request; "" for the one person of stdio and
// loopback HTTP), with their own User ID at each Company (Poppy 0.1 §4.2),
// Sessions, Account Tokens and DPoP keys, kept in their own view of the
// store by their own view of the Agent. It is safe for concurrent use.
type sessions struct {
	companies *companies
	people    *people      // each person's state
	agent     *auth.Agent  // the default user's; nil: no identity, so no Session
	store     *store.Store // the default user's view; required with agent
	choice    signInChoice // which sign-in tool start_session advises
	// noIdentity says exactly what is missing when agent is nil (Options.NoIdentity).
	noIdentity string
	log        *slog.Logger
	// ready runs once a Session exists, for each of its Company's domains
	// (Server.sessionReady); set by New.
	ready func(ctx context.Context, cs *agent.Company, co *discovery.Company)
}

// reach is what a tool call reaches of a Company: the person's state
// there, the documents of the domain it was given (Poppy 0.1 §3.2: the
// Session is the Company's, the endpoints the domain's) and the Session.
type reach struct {
	cs   *agent.Company
	co   *discovery.Company
	sess *auth.Session
}

// siteKey identifies a domain of a Company: its organization.domain as
// tool names use it, the same whichever host the User typed.
func siteKey(co *discovery.Company) string { return nameKey(orgDomain(co)) }

// takeNotice returns, once, what the model should hear of what happened
// to the Session's sign-in by itself, or "".
func takeNotice(cs *agent.Company) string {
	sess := cs.Session()
	if sess == nil {
		return ""
	}
	var notes []string
	for _, c := range sess.TakeChanges() {
		switch c {
		case auth.ChangeAccountRefused:
			notes = append(notes, refusedNotice)
		case auth.ChangeRestarted:
			notes = append(notes, restartedNotice)
		case auth.ChangeSignedOutElsewhere:
			notes = append(notes, signedOutElsewhereNotice)
		}
	}
	return strings.Join(notes, " ")
}

const (
	refusedNotice = "The Account Token poppy-mcp held was refused by the Company (expired or revoked, or the user disconnected poppy-mcp " +
		"in the account settings), so it was dropped and the Session continues signed out. Sign in again when a task needs the account."
	restartedNotice = "The Company signed the Session in without giving poppy-mcp an Account Token, so it could not be renewed signed in: " +
		"poppy-mcp started a new signed-out Session in its place. Sign in again when a task needs the account."
	signedOutElsewhereNotice = "The user signed poppy-mcp out of this Company outside this conversation (with `poppy-mcp sign-out`, or in another " +
		"poppy-mcp), so the Session continues signed out. Sign in again only if the user asks for a task that needs the account."
)

// errNoIdentity is returned by tools that need a Session when poppy-mcp has
// no agent identity.
var errNoIdentity = errors.New("poppy-mcp has no agent identity yet: run `poppy-mcp init --client-id https://YOUR.DOMAIN/agent.json`, " +
	"publish the agent.json and jwks.json it writes at those URLs, and start poppy-mcp again. " +
	"Discovery works without one")

// authCompany is what auth needs to know, taken from one domain's documents.
func authCompany(co *discovery.Company) auth.Company {
	doc, md := co.Document, co.Metadata
	c := auth.Company{
		Issuer: doc.Auth.Issuer, Domain: doc.Organization.Domain,
		TokenEndpoint: md.TokenEndpoint, RevocationEndpoint: md.RevocationEndpoint,
		AuthorizationEndpoint:       md.AuthorizationEndpoint,
		DeviceAuthorizationEndpoint: md.DeviceAuthorizationEndpoint,
	}
	if doc.Auth.Mediated != nil {
		c.MediatedEndpoint = doc.Auth.Mediated.Endpoint
	}
	if doc.Web != nil {
		c.BrowserSessionEndpoint = doc.Web.BrowserSessionEndpoint
	}
	for _, a := range doc.APIs {
		if a.Type == "mcp" {
			c.MCPServers = append(c.MCPServers, a.URL)
		}
	}
	return c
}

// stateFor returns the person's state at a usable Company, creating it,
// and the documents of the domain asked for, which it keeps beside its
// other domains'. The person is the one whose request ctx is.
func (ss *sessions) stateFor(ctx context.Context, domain string) (*agent.Company, *discovery.Company, error) {
	co, err := ss.companies.usable(ctx, domain)
	if err != nil {
		return nil, nil, err
	}
	cs := ss.people.of(ctx).Company(co.Document.Auth.Issuer)
	cs.AddSite(siteKey(co), co)
	return cs, co, nil
}

// known returns the state of a Company already discovered and used by the
// person of ctx, or nil.
func (ss *sessions) known(ctx context.Context, domain string) *agent.Company {
	a := ss.companies.knownAuth(domain)
	if a == nil {
		return nil
	}
	return ss.people.of(ctx).Known(a.Issuer)
}

// session returns what the call reaches of the Company at domain, its
// Session started when there is none or fresh is set (auth.Sessions.Open:
// a Session saved by an earlier run is resumed). The Session hooks (ready)
// run for each of the Company's domains once a Session exists: for every
// domain known when a Session starts, and for a domain first used later.
// The Session is the person's whose request ctx is (mcpauth.UserFrom).
func (ss *sessions) session(ctx context.Context, domain string, fresh bool) (*reach, error) {
	if ss.agent == nil {
		return nil, errNoIdentity
	}
	cs, co, err := ss.stateFor(ctx, domain)
	if err != nil {
		return nil, err
	}
	var due []*discovery.Company
	sess, err := cs.Person().Sessions().Open(ctx, authCompany(co), fresh, func(s *auth.Session) { due = cs.DueHooks(s) })
	if err != nil {
		return nil, err
	}
	for _, site := range due {
		ss.ready(ctx, cs, site)
	}
	return &reach{cs: cs, co: co, sess: sess}, nil
}

// saveSignedIn records the Session's new state after a sign-in, sign-out or
// narrowing (never its token), if sess is still cs's Session.
func (ss *sessions) saveSignedIn(ctx context.Context, cs *agent.Company, sess *auth.Session) {
	cs.Person().Sessions().Save(ctx, cs.Issuer(), sess)
}

// sessionAt returns the Session at the domain whose documents co are
// (Poppy 0.1 §3.2): its website, mediated endpoint and MCP servers.
func sessionAt(sess *auth.Session, co *discovery.Company) (*auth.Site, error) {
	return sess.At(authCompany(co))
}

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
	r, err := ss.session(ctx, domain, args.New)
	if err != nil {
		ss.log.WarnContext(ctx, "no Session", "domain", domain, "err", err.Error())
		return ss.failure(ctx, domain, err)
	}
	co, sess := r.co, r.sess
	if args.Scopes != nil {
		if fail := ss.narrow(ctx, r, args.Scopes.sorted()); fail != nil {
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
		state = "signed in with the scopes of " + companyWord(strings.Join(info.Scopes, " ")) // as the Company granted them
	}
	ss.log.DebugContext(ctx, "session ready", "domain", res.Domain, "session_id", info.ID, "signed_in", info.SignedIn)
	res.Notice = takeNotice(r.cs)
	return result(res, "Session %s with %s is open, %s. poppy-mcp renews it by itself. %s", info.ID, res.Domain, state, res.Notice)
}

// failure phrases an error from getting a Session for the model, with what
// to do next. Errors from auth and discovery never carry secrets.
func (ss *sessions) failure(ctx context.Context, domain string, err error) *mcp.CallToolResult {
	var (
		refused *discovery.RefusedError
		inErr   *discovery.InputError
		wait    *auth.RetryAfterError
		aerr    *auth.Error
	)
	if ext, ok := requiredExtension(err); ok {
		ss.log.InfoContext(ctx, "no session", "domain", domain, "code", "extension_required")
		return extensionFailure(domain, ext, "a Session", fmt.Sprintf(insteadOfSession, domain), nil)
	}
	code, next := "session_failed", "Try again later."
	switch {
	case errors.Is(err, errNoIdentity):
		code, next = "no_identity", "Tell the user how to set up poppy-mcp's identity (see the message)."
		if ss.noIdentity != "" { // what is missing, exactly
			err = errors.New("poppy-mcp has no agent identity yet: " + ss.noIdentity + ". Discovery works without one")
		}
	case errors.As(err, &inErr):
		code, next = "invalid_domain", "Give the domain alone, like example.com."
	case errors.As(err, &refused):
		code, next = "company_unusable", "This Company's documents break the protocol; it cannot be used."
	case errors.As(err, &wait), errors.Is(err, discovery.ErrRateLimited):
		code, next = "rate_limited", "Wait the time given, then call the tool again."
	case errors.As(err, &aerr):
		code = aerr.Code
	}
	ss.log.InfoContext(ctx, "no session", "domain", domain, "code", code, "err", err.Error())
	return failure(map[string]string{"error": code, "next": next}, "%v. %s", err, next)
}

// narrow gives the signed-in Session a token for fewer scopes than the
// Account Token has, or for all of them again when scopes is empty. Poppy
// 0.1 §4.8: "scope MAY ask for fewer scopes than the Account Token has, for
// example read-only access for a task that only looks things up. It can't
// ask for more."
func (ss *sessions) narrow(ctx context.Context, r *reach, scopes []string) *mcp.CallToolResult {
	co, sess := r.co, r.sess
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
		return ss.failure(ctx, domain, err)
	}
	ss.saveSignedIn(ctx, r.cs, sess) // only if sess is still the Company's Session
	return nil
}
