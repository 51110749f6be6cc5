package tools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// runtime is what the tools keep for one Company, identified by its issuer.
// Poppy 0.1 §3.2: several domains naming one issuer "are then one Company:
// the same User IDs (4.2), Sessions, and Account Tokens apply to all of
// them". So a runtime has one Session, and the documents of each of the
// Company's domains used so far: a tool given a domain uses that domain's
// APIs, MCP servers, website and mediated endpoint. It is safe for
// concurrent use.
type runtime struct {
	issuer string
	signin signInState // sign-in flows and the Account Token (signin.go); has its own lock

	// mu guards everything below; it is held while a Session starts, so
	// concurrent tools share one Session.
	mu      sync.Mutex
	sites   map[string]*discovery.Company // each domain's documents, by siteKey
	hooked  map[string]*auth.Session      // by siteKey: the Session whose hooks ran for the domain
	session *auth.Session
	domain  string // the domain the Session was started through, as saved
	userID  string
}

// siteKey identifies a domain of a Company: its organization.domain as
// tool names use it, the same whichever host the User typed.
func siteKey(co *discovery.Company) string { return nameKey(orgDomain(co)) }

// dueHooks marks and returns, in key order, the domains whose Session hooks
// have not run with sess; rt.mu is held.
func (rt *runtime) dueHooks(sess *auth.Session) []*discovery.Company {
	var due []*discovery.Company
	for _, key := range slices.Sorted(maps.Keys(rt.sites)) {
		if rt.hooked[key] != sess {
			rt.hooked[key] = sess
			due = append(due, rt.sites[key])
		}
	}
	return due
}

// errNoIdentity is returned by tools that need a Session when poppy-mcp has
// no agent identity.
var errNoIdentity = errors.New("poppy-mcp has no agent identity yet: run `poppy-mcp init --client-id https://YOUR.DOMAIN/agent.json`, " +
	"publish the agent.json and jwks.json it writes at those URLs, and restart with --client-id (or POPPY_CLIENT_ID). " +
	"Discovery works without one")

// usableCompany discovers the Company and refuses one with error findings.
func (s *Server) usableCompany(ctx context.Context, domain string) (*discovery.Company, error) {
	co, err := s.company(ctx, domain, false)
	if err != nil {
		return nil, err
	}
	if err := co.Err(); err != nil {
		return nil, err
	}
	if co.Document.Auth == nil || co.Metadata == nil {
		return nil, fmt.Errorf("%s offers no sign-in server (auth), so it has no Sessions", co.Domain)
	}
	return co, nil
}

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

// runtimeFor returns the runtime of a usable Company, creating it, and the
// documents of the domain asked for, which it keeps beside its other
// domains'.
func (s *Server) runtimeFor(ctx context.Context, domain string) (*runtime, *discovery.Company, error) {
	co, err := s.usableCompany(ctx, domain)
	if err != nil {
		return nil, nil, err
	}
	issuer := co.Document.Auth.Issuer
	s.mu.Lock()
	rt := s.runtimes[issuer]
	if rt == nil {
		rt = &runtime{issuer: issuer, sites: map[string]*discovery.Company{}, hooked: map[string]*auth.Session{}}
		s.runtimes[issuer] = rt
	}
	s.mu.Unlock()
	rt.mu.Lock()
	rt.sites[siteKey(co)] = co
	rt.mu.Unlock()
	return rt, co, nil
}

// session returns the Company's Session, starting one when there is none or
// fresh is set, and the documents of the domain asked for. A Session saved
// by an earlier run is resumed (Poppy 0.1 §4.2: the Company decides how long
// a Session lasts; auth starts a new one when it has ended). Session hooks
// run for each of the Company's domains once a Session exists: for every
// domain known when a Session starts, and for a domain first used later.
func (s *Server) session(ctx context.Context, domain string, fresh bool) (*runtime, *discovery.Company, *auth.Session, error) {
	if s.deps.Agent == nil {
		return nil, nil, nil, errNoIdentity
	}
	rt, co, err := s.runtimeFor(ctx, domain)
	if err != nil {
		return nil, nil, nil, err
	}
	rt.mu.Lock()
	err = s.ensureSession(ctx, rt, co, fresh)
	sess := rt.session
	var due []*discovery.Company
	if err == nil {
		due = rt.dueHooks(sess)
	}
	rt.mu.Unlock()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, site := range due {
		for _, hook := range sessionHooks {
			hook(ctx, s, rt, site)
		}
	}
	return rt, co, sess, nil
}

// ensureSession starts or resumes rt's Session through the domain of co;
// rt.mu is held. auth chooses how: the newest Session an earlier run saved
// is continued while the Company has it, and the Session starts signed in
// when an Account Token is held (Poppy 0.1 §4.8).
func (s *Server) ensureSession(ctx context.Context, rt *runtime, co *discovery.Company, fresh bool) error {
	if rt.session != nil && !fresh && !rt.session.Gone(ctx) { // Gone: `poppy-mcp forget` ran: a new User ID
		return nil
	}
	userID, err := s.deps.Store.UserID(ctx, rt.issuer)
	if err != nil {
		return err
	}
	rt.userID = userID
	saved := ""
	if !fresh {
		saved = s.savedSession(ctx, rt)
	}
	sess, err := s.deps.Agent.Open(ctx, authCompany(co), userID, saved)
	if err != nil {
		return err
	}
	if saved != "" && sess.Info().ID != saved {
		s.log.Info("the saved Session could not be continued; a new one started", "issuer", rt.issuer)
	}
	rt.session, rt.domain = sess, co.Domain
	return s.saveSession(ctx, rt)
}

// savedSession returns the ID of the newest Session an earlier run saved
// for rt's User, or "".
func (s *Server) savedSession(ctx context.Context, rt *runtime) string {
	saved, err := s.deps.Store.Sessions(ctx, rt.issuer)
	if err != nil || len(saved) == 0 || saved[0].UserID != rt.userID {
		return ""
	}
	return saved[0].ID
}

// saveSession records rt's Session (never its token) so a restart resumes it.
func (s *Server) saveSession(ctx context.Context, rt *runtime) error {
	info := rt.session.Info()
	return s.deps.Store.PutSession(ctx, store.Session{
		Issuer: rt.issuer, UserID: rt.userID, ID: info.ID, Domain: rt.domain,
		SignedIn: info.SignedIn, Scopes: slices.Clone(info.Scopes), ExpiresAt: info.ExpiresAt,
	})
}

// sessionAt returns the Session at the domain whose documents co are
// (Poppy 0.1 §3.2): its website, mediated endpoint and MCP servers.
func sessionAt(sess *auth.Session, co *discovery.Company) (*auth.Site, error) {
	return sess.At(authCompany(co))
}
