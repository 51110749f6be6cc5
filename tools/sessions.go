package tools

// This file is the sessions capability: the state the tools keep for each
// Company, its one Session (Poppy 0.1 §4.2, §3.2), the Session hooks that
// run once a Session exists, and start_session.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// sessions is the state of every Company the tools have used, by person
// and issuer. Everything a person has at a Company is theirs alone: a
// hosted poppy-mcp serves several people, each a local
// user (mcpauth.KeyFrom of the request; "" for the one person of stdio and
// loopback HTTP), with their own User ID at each Company (Poppy 0.1 §4.2),
// Sessions, Account Tokens and DPoP keys, kept in their own view of the
// store (store.Store.ForUser) by their own view of the Agent
// (auth.Agent.WithStore). It is safe for concurrent use.
type sessions struct {
	companies *companies
	agent     *auth.Agent  // the default user's; nil: no identity, so no Session
	store     *store.Store // the default user's view; required with agent
	choice    signInChoice // which sign-in tool start_session advises
	// noIdentity says exactly what is missing when agent is nil (Options.NoIdentity).
	noIdentity string
	log        *slog.Logger
	// ready runs once a Session exists, for each of its Company's domains
	// (Server.sessionReady); set by New.
	ready func(ctx context.Context, cs *companyState, co *discovery.Company)

	// mu guards byCompany and agents.
	mu        sync.Mutex
	byCompany map[personCompany]*companyState
	agents    map[string]*auth.Agent // by local user key: views of agent on the person's store
}

// personCompany is one person at one Company: a local user key and an issuer.
type personCompany struct{ user, issuer string }

// agentFor returns the Agent of the local user: the Agent itself for the
// default user, a view of it on the person's store for anyone else.
func (ss *sessions) agentFor(user string) *auth.Agent {
	if user == "" || ss.agent == nil {
		return ss.agent
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	a := ss.agents[user]
	if a == nil {
		a = ss.agent.WithStore(ss.store.ForUser(user))
		ss.agents[user] = a
	}
	return a
}

// storeFor is the local user's view of the store; nil without a store.
func (ss *sessions) storeFor(user string) *store.Store {
	if ss.store == nil || user == "" {
		return ss.store
	}
	return ss.store.ForUser(user)
}

// companyState is what the tools keep for one person at one Company,
// identified by its issuer.
// Poppy 0.1 §3.2: several domains naming one issuer "are then one Company:
// the same User IDs (4.2), Sessions, and Account Tokens apply to all of
// them". So a companyState has one Session, and the documents of each of the
// Company's domains used so far: a tool given a domain uses that domain's
// APIs, MCP servers, website and mediated endpoint. It is safe for
// concurrent use.
type companyState struct {
	person mcpauth.User // whose it is; the zero User in one person's deployment
	user   string       // person.Key(), the local user key; "" in one person's deployment
	issuer string
	store  *store.Store // the person's view of the store; nil without one

	// mu guards everything below; it is held while a Session starts, so
	// concurrent tools share one Session.
	mu      sync.Mutex
	sites   map[string]*discovery.Company // each domain's documents, by siteKey
	hooked  map[string]*auth.Session      // by siteKey: the Session whose hooks ran for the domain
	session *auth.Session
	domain  string // the domain the Session was started through, as saved
	userID  string
	// release gives back this process's claim on session (auth.ClaimSession).
	release func()
}

// logContext is a context for what is logged of cs's work outside a
// request of the person (background work, pages): it names the person, as
// the request's would (pseudonymously, mcpauth.LogHandler).
func (cs *companyState) logContext() context.Context { return cs.withPerson(context.Background()) }

// withPerson returns ctx (a page's request) naming cs's person, as
// logContext does.
func (cs *companyState) withPerson(ctx context.Context) context.Context {
	if cs.person.IsZero() {
		return ctx
	}
	return mcpauth.WithUser(ctx, cs.person)
}

// siteKey identifies a domain of a Company: its organization.domain as
// tool names use it, the same whichever host the User typed.
func siteKey(co *discovery.Company) string { return nameKey(orgDomain(co)) }

// dueHooks marks and returns, in key order, the domains whose Session hooks
// have not run with sess; cs.mu is held.
func (cs *companyState) dueHooks(sess *auth.Session) []*discovery.Company {
	var due []*discovery.Company
	for _, key := range slices.Sorted(maps.Keys(cs.sites)) {
		if cs.hooked[key] != sess {
			cs.hooked[key] = sess
			due = append(due, cs.sites[key])
		}
	}
	return due
}

// current returns the Company's Session, or nil before the first.
func (cs *companyState) current() *auth.Session {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.session
}

// takeNotice returns, once, what the model should hear of what happened
// to the Session's sign-in by itself, or "".
func (cs *companyState) takeNotice() string {
	sess := cs.current()
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

// stateFor returns the state of a usable Company, creating it, and the
// documents of the domain asked for, which it keeps beside its other
// domains'.
func (ss *sessions) stateFor(ctx context.Context, domain string) (*companyState, *discovery.Company, error) {
	co, err := ss.companies.usable(ctx, domain)
	if err != nil {
		return nil, nil, err
	}
	person, _ := mcpauth.UserFrom(ctx)
	key := personCompany{person.Key(), co.Document.Auth.Issuer}
	ss.mu.Lock()
	cs := ss.byCompany[key]
	if cs == nil {
		cs = &companyState{person: person, user: key.user, issuer: key.issuer, store: ss.storeFor(key.user),
			sites: map[string]*discovery.Company{}, hooked: map[string]*auth.Session{}}
		ss.byCompany[key] = cs
	}
	ss.mu.Unlock()
	cs.mu.Lock()
	cs.sites[siteKey(co)] = co
	cs.mu.Unlock()
	return cs, co, nil
}

// all returns the state of every person at every Company used so far.
func (ss *sessions) all() []*companyState {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Collect(maps.Values(ss.byCompany))
}

// known returns the state of a Company already discovered and used by the
// local user, or nil.
func (ss *sessions) known(user, domain string) *companyState {
	a := ss.companies.knownAuth(domain)
	if a == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.byCompany[personCompany{user, a.Issuer}]
}

// session returns the Company's Session, starting one when there is none or
// fresh is set, and the documents of the domain asked for. A Session saved
// by an earlier run is resumed (Poppy 0.1 §4.2: the Company decides how long
// a Session lasts; auth starts a new one when it has ended). The Session
// hooks (ready) run for each of the Company's domains once a Session exists:
// for every domain known when a Session starts, and for a domain first used
// later. The Session is the person's whose request ctx is (mcpauth.UserFrom).
func (ss *sessions) session(ctx context.Context, domain string, fresh bool) (*companyState, *discovery.Company, *auth.Session, error) {
	if ss.agent == nil {
		return nil, nil, nil, errNoIdentity
	}
	cs, co, err := ss.stateFor(ctx, domain)
	if err != nil {
		return nil, nil, nil, err
	}
	cs.mu.Lock()
	err = ss.ensureSession(ctx, cs, co, fresh)
	sess := cs.session
	var due []*discovery.Company
	if err == nil {
		due = cs.dueHooks(sess)
	}
	cs.mu.Unlock()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, site := range due {
		ss.ready(ctx, cs, site)
	}
	return cs, co, sess, nil
}

// ensureSession starts or resumes cs's Session through the domain of co;
// cs.mu is held. auth chooses how: the newest Session an earlier run saved
// is continued while the Company has it, and the Session starts signed in
// when an Account Token is held (Poppy 0.1 §4.8).
func (ss *sessions) ensureSession(ctx context.Context, cs *companyState, co *discovery.Company, fresh bool) error {
	if cs.session != nil && !fresh && !cs.session.Gone(ctx) { // Gone: `poppy-mcp forget` ran: a new User ID
		return nil
	}
	userID, err := cs.store.UserID(ctx, cs.issuer) // Poppy 0.1 §4.2: a User ID per person per Company
	if err != nil {
		return err
	}
	cs.userID = userID
	saved, release := "", func() {}
	if !fresh {
		saved, release = ss.savedSession(ctx, cs)
	}
	sess, err := ss.agentFor(cs.user).Open(ctx, authCompany(co), userID, saved)
	if err != nil {
		release()
		return err
	}
	if id := sess.Info().ID; id != saved {
		if saved != "" {
			ss.log.InfoContext(ctx, "the saved Session could not be continued; a new one started", "issuer", cs.issuer)
		}
		release()
		release = ss.claim(ctx, cs, id)
	}
	if cs.release != nil {
		cs.release() // the Session it replaces
	}
	cs.session, cs.domain, cs.release = sess, co.Domain, release
	return ss.save(ctx, cs)
}

// maxResumeTries bounds the saved Sessions looked at on a start.
const maxResumeTries = 3

// savedSession returns the ID of the newest Session an earlier run saved
// for cs's User that no other process or replica is using now, claimed for
// this one, or "" (auth.ClaimSession: two processes must not continue one
// Session).
func (ss *sessions) savedSession(ctx context.Context, cs *companyState) (string, func()) {
	saved, err := cs.store.Sessions(ctx, cs.issuer)
	if err != nil {
		return "", func() {}
	}
	for i, rec := range saved {
		if i == maxResumeTries || rec.UserID != cs.userID {
			break
		}
		release, ok, err := auth.ClaimSession(ctx, cs.store, cs.issuer, rec.ID)
		if err != nil {
			break
		}
		if ok {
			return rec.ID, release
		}
	}
	return "", func() {}
}

// claim claims the new Session id for this process; a new Session's claim
// is free, so a failure (the database briefly away) only leaves it
// unclaimed.
func (ss *sessions) claim(ctx context.Context, cs *companyState, id string) func() {
	release, ok, err := auth.ClaimSession(ctx, cs.store, cs.issuer, id)
	if err != nil || !ok {
		ss.log.WarnContext(ctx, "could not claim the new Session", "issuer", cs.issuer, "err", err)
		return func() {}
	}
	return release
}

// close gives back this process's claims on its Sessions, so another
// process or replica can continue them at once.
func (ss *sessions) close() {
	for _, cs := range ss.all() {
		cs.mu.Lock()
		if cs.release != nil {
			cs.release()
			cs.release = nil
		}
		cs.mu.Unlock()
	}
}

// save records cs's Session (never its token) so a restart resumes it;
// cs.mu is held.
func (ss *sessions) save(ctx context.Context, cs *companyState) error {
	info := cs.session.Info()
	return cs.store.PutSession(ctx, store.Session{
		Issuer: cs.issuer, UserID: cs.userID, ID: info.ID, Domain: cs.domain,
		SignedIn: info.SignedIn, Scopes: slices.Clone(info.Scopes), ExpiresAt: info.ExpiresAt,
	})
}

// saveSignedIn records the Session's new state after a sign-in, sign-out or
// narrowing (never its token), if sess is still cs's Session.
func (ss *sessions) saveSignedIn(ctx context.Context, cs *companyState, sess *auth.Session) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.session != sess {
		return
	}
	if err := ss.save(ctx, cs); err != nil {
		ss.log.WarnContext(ctx, "could not save the Session", "issuer", cs.issuer, "err", err)
	}
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
	cs, co, sess, err := ss.session(ctx, domain, args.New)
	if err != nil {
		ss.log.WarnContext(ctx, "no Session", "domain", domain, "err", err.Error())
		return ss.failure(ctx, domain, err)
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
		state = "signed in with the scopes of " + companyWord(strings.Join(info.Scopes, " ")) // as the Company granted them
	}
	ss.log.DebugContext(ctx, "session ready", "domain", res.Domain, "session_id", info.ID, "signed_in", info.SignedIn)
	res.Notice = cs.takeNotice()
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
		return ss.failure(ctx, domain, err)
	}
	ss.saveSignedIn(ctx, cs, sess) // under cs.mu, and only if sess is still cs's Session
	return nil
}
