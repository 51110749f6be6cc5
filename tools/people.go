package tools

// This file keeps the people of a hosted poppy-mcp apart at the MCP layer.
// Each person (a local user, mcpauth.KeyFrom of the request) is served by an
// MCP server of their own: the built-in tools, plus the tools of the
// Companies that person has a Session with (API operations, relayed MCP
// tools). mcp-go sends notifications/tools/list_changed to every session of
// the server whose tools change (docs/mcp-go.md), so with a server per
// person a Company tool announced for one person reaches only that
// person's MCP sessions, at both revisions, and no person can list or call
// a tool of another's Company: the server that would hold it is not theirs.
// Progress, log and elicitation messages go to the session of the request
// they belong to (the request's context), whichever server it is.
//
// The default user "" (stdio, loopback HTTP: one person) is served by the
// Server's own MCP server, exactly as before people were kept apart.

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// DefaultEvictIdle is Options.EvictIdle when zero.
const DefaultEvictIdle = 10 * time.Minute

// people is the registry of people: each person's state (agent.Person),
// their MCP server and its streamable HTTP handler. It forgets a person of
// a hosted poppy-mcp who has been idle for evictIdle (sweep): their state
// is in the store, and their next request loads it back (ready). The
// default user "" is never forgotten. It is safe for concurrent use.
type people struct {
	opts  agent.Options            // what each Person is made with
	def   *server.MCPServer        // the default user's: Server.mcp
	fresh func() *server.MCPServer // a new server with every built-in tool
	// restore brings back, for the person ctx acts for, the Companies they
	// use (Server.restorePerson); it runs as the person's background work.
	restore func(ctx context.Context)
	// evictIdle is how long a person of a hosted poppy-mcp stays idle
	// before they are forgotten; zero or less: never.
	evictIdle time.Duration
	// released is told of the HTTP handlers of the people forgotten, once
	// they are shut down (httpHandlers.remove). Nil: nothing is.
	released func([]mcpHandler)

	// mu guards byKey and the default entry's making.
	mu      sync.Mutex
	byKey   personEntries // by local user key, "" excluded
	deflt   *personEntry  // the default user's; nil until first used
	stopped bool          // close ran: nobody is forgotten any more
}

// personEntries are the people of a hosted poppy-mcp, by local user key.
type personEntries map[string]*personEntry

// personEntry is one person in the registry.
type personEntry struct {
	person  *agent.Person
	srv     *server.MCPServer
	handler mcpHandler // nil until their first HTTP request
	// restored is closed once the person's Companies are back (ready);
	// nil until their first HTTP request.
	restored chan struct{}
}

// entryLocked returns the registry entry of person, making it; p.mu is held.
func (p *people) entryLocked(person mcpauth.User) *personEntry {
	key := person.Key()
	if key == "" {
		if p.deflt == nil {
			p.deflt = &personEntry{person: agent.New(mcpauth.User{}, &p.opts), srv: p.def}
		}
		return p.deflt
	}
	e := p.byKey[key]
	if e == nil {
		e = &personEntry{person: agent.New(person, &p.opts), srv: p.fresh()}
		p.byKey[key] = e
	}
	return e
}

// of returns the state of the person whose request ctx is, making it.
func (p *people) of(ctx context.Context) *agent.Person {
	person, _ := mcpauth.UserFrom(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entryLocked(person).person
}

// hold counts a request of person that is not an MCP request (a page of
// theirs) in flight until the function it returns is called, so that they
// are not forgotten meanwhile.
func (p *people) hold(person mcpauth.User) (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entryLocked(person).person.Begin()
}

// all returns every person's state, the default user's included once used.
func (p *people) all() []*agent.Person {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*agent.Person, 0, len(p.byKey)+1)
	if p.deflt != nil {
		out = append(out, p.deflt.person)
	}
	for _, e := range p.byKey {
		out = append(out, e.person)
	}
	return out
}

// server returns the MCP server of the person whose state pr is: the
// Server's own for the default user.
func (p *people) server(pr *agent.Person) *server.MCPServer {
	if pr.Key() == "" {
		return p.def
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.byKey[pr.Key()]; e != nil && e.person == pr {
		return e.srv
	}
	return p.fresh() // a person forgotten meanwhile: what is announced goes nowhere
}

// restoreWait bounds how long a person's first requests to this process
// wait for their Companies to come back (restore): the discovery and
// Session start of each, usually well under a second.
const restoreWait = 15 * time.Second

// begin takes the request of a person of a hosted poppy-mcp: their entry,
// with the request counted in flight until end (agent.Person.Begin), so
// that they are not forgotten while it runs; the HTTP handler of their MCP
// server is made with build on first use, and their Companies are brought
// back (restore) on their first request.
func (p *people) begin(person mcpauth.User, build newHandler) (e *personEntry, first bool, end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e = p.entryLocked(person)
	if e.handler == nil {
		e.handler = build(e.srv, e.person.Store())
	}
	if first = e.restored == nil; first {
		e.restored = make(chan struct{})
	}
	return e, first, e.person.Begin()
}

// ready brings back, once per person and process (and again after they
// were forgotten), the Companies the person already uses, so that this
// replica lists and serves the tools of those Companies from the person's
// first request, whichever replica (or earlier run) they used before;
// their requests wait for it, up to restoreWait.
func (p *people) ready(ctx context.Context, e *personEntry, first bool) {
	if first {
		person := detach(ctx) // the person (and request ID) for its log lines, not the request's end
		done := e.restored
		if !e.person.Go(func(bg context.Context) {
			defer close(done)
			ctx, cancel := context.WithTimeout(person, restoreWait)
			defer cancel()
			stop := context.AfterFunc(bg, cancel) // Close and forgetting stop it
			defer stop()
			p.restore(ctx)
		}) {
			close(done) // shutting down
		}
	}
	select {
	case <-e.restored: // every request after the first few
		return
	default:
	}
	wait := time.NewTimer(restoreWait)
	defer wait.Stop()
	select {
	case <-e.restored:
	case <-ctx.Done():
	case <-wait.C:
	}
}

// newHandler makes the streamable HTTP handler of an MCP server, its
// sessions kept in the person's view of the store (nil: in memory).
type newHandler func(*server.MCPServer, *store.Store) mcpHandler

// route serves each request with the handler of its person: the default
// user's MCP server for "", the person's own for anyone else. A request
// (a GET stream included) keeps its person from being forgotten while it
// runs.
func (p *people) route(build newHandler) http.Handler {
	def := build(p.def, p.opts.Store)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		person, _ := mcpauth.UserFrom(r.Context())
		if person.Key() == "" {
			def.ServeHTTP(w, r)
			return
		}
		e, first, end := p.begin(person, build)
		defer end()
		p.ready(r.Context(), e, first)
		e.handler.ServeHTTP(w, r)
	})
}

// sweepEvery is how often the registry looks for people to forget.
func sweepEvery(evictIdle time.Duration) time.Duration {
	return min(max(evictIdle/4, time.Second), time.Minute)
}

// forgetIdle forgets, until ctx ends, the people idle for evictIdle; it
// runs on the Server's background.
func (p *people) forgetIdle(ctx context.Context) {
	every(ctx, sweepEvery(p.evictIdle), func() { p.sweep(p.opts.Now()) })
}

// sweep forgets the people of a hosted poppy-mcp idle since before now
// minus evictIdle: no request in flight (an open GET stream is one) and no
// sign-in pending. It returns how many it forgot.
func (p *people) sweep(now time.Time) int {
	if p.evictIdle <= 0 {
		return 0
	}
	p.mu.Lock()
	var gone []*personEntry
	for key, e := range p.byKey {
		if since, idle := e.person.IdleSince(); idle && !p.stopped && now.Sub(since) >= p.evictIdle {
			delete(p.byKey, key) // under mu: no request can begin with them now
			gone = append(gone, e)
		}
	}
	p.mu.Unlock()
	var handlers []mcpHandler
	for _, e := range gone {
		e.forget()
		if e.handler != nil {
			handlers = append(handlers, e.handler)
		}
	}
	if p.released != nil && len(handlers) > 0 {
		p.released(handlers)
	}
	return len(gone)
}

// forget stops everything of the entry: its MCP sessions and their sweeper
// (mcp-go's), then the person's goroutines, sign-ins, relays and Session
// claims (agent.Person.Close).
func (e *personEntry) forget() {
	if e.handler != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = e.handler.Shutdown(ctx)
		cancel()
	}
	e.person.Close()
}

// close forgets everyone, the default user included, as the Server
// closes: their background work has stopped already (Server.Close).
func (p *people) close() {
	p.mu.Lock()
	p.stopped = true
	all := slices.Collect(maps.Values(p.byKey))
	if p.deflt != nil {
		all = append(all, &personEntry{person: p.deflt.person}) // the Server's own MCP server is not shut down
	}
	p.mu.Unlock()
	for _, e := range all {
		e.forget()
	}
}
