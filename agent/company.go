package agent

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// Relay is a connection of the person to one of the Company's MCP servers.
type Relay interface{ Close() error }

// Company is what a Person holds for one Company, identified by its
// issuer. Poppy 0.1 §3.2: several domains naming one issuer "are then one
// Company: the same User IDs (4.2), Sessions, and Account Tokens apply to
// all of them". So a Company has one Session (Person.Sessions), and the
// documents of each of its domains used so far: a tool given a domain uses
// that domain's APIs, MCP servers, website and mediated endpoint. It is
// safe for concurrent use.
type Company struct {
	person *Person
	issuer string

	// mu guards everything below. It is never held during I/O.
	mu       sync.Mutex
	sites    map[string]*discovery.Company // each domain's documents, by site key
	hooked   map[string]*auth.Session      // by site key: the Session whose hooks ran for the domain
	trackers map[conversation.Owner]*conversation.Tracker
	relays   map[string]Relay // by the MCP layer's key: prefix and URL
	closed   bool             // the Person closed: nothing more is kept
}

func newCompany(p *Person, issuer string) *Company {
	return &Company{person: p, issuer: issuer, sites: map[string]*discovery.Company{}, hooked: map[string]*auth.Session{},
		trackers: map[conversation.Owner]*conversation.Tracker{}, relays: map[string]Relay{}}
}

// Person returns whose Company state it is.
func (c *Company) Person() *Person { return c.person }

// Issuer returns the Company's auth.issuer.
func (c *Company) Issuer() string { return c.issuer }

// Store returns the person's view of the store; nil without a store.
func (c *Company) Store() *store.Store { return c.person.store }

// Session returns the person's Session with the Company, or nil before the
// first.
func (c *Company) Session() *auth.Session {
	if c.person.sessions == nil {
		return nil
	}
	return c.person.sessions.Current(c.issuer)
}

// LogContext is a context for what is logged of the Company's work outside
// a request of the person (background work, pages): it names the person,
// as the request's would (pseudonymously, mcpauth.LogHandler).
func (c *Company) LogContext() context.Context { return c.person.WithPerson(context.Background()) }

// AddSite keeps the documents of one of the Company's domains, by key.
func (c *Company) AddSite(key string, co *discovery.Company) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sites[key] = co
}

// DueHooks marks and returns, in key order, the domains whose Session
// hooks have not run with sess: every domain known when a Session starts,
// and a domain first used later.
func (c *Company) DueHooks(sess *auth.Session) []*discovery.Company {
	c.mu.Lock()
	defer c.mu.Unlock()
	var due []*discovery.Company
	for _, key := range slices.Sorted(maps.Keys(c.sites)) {
		if c.hooked[key] != sess {
			c.hooked[key] = sess
			due = append(due, c.sites[key])
		}
	}
	return due
}

// SignIn returns the person's latest sign-in at the Company, or nil.
func (c *Company) SignIn() *auth.Flow { return c.person.signIns.Current(c.issuer) }

// Tracker returns the Tracker of owner's conversations, sending through
// cl and keeping what it tracks in the person's store. Calls on one
// conversation share its locks whichever Session's client they use.
func (c *Company) Tracker(cl *conversation.Client, owner conversation.Owner) (*conversation.Tracker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tr := c.trackers[owner]; tr != nil {
		return tr.WithClient(cl), nil
	}
	// Person: a Worker that sends the messages it leaves pending acts for
	// this person (ForOwner).
	tr, err := conversation.NewTracker(cl, c.person.store, owner, &conversation.TrackerOptions{Person: OwnerOf(c.person.user)})
	if err == nil {
		c.trackers[owner] = tr
	}
	return tr, err
}

// Relay returns the relay kept under key, or nil.
func (c *Company) Relay(key string) Relay {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relays[key]
}

// KeepRelay keeps r under key and returns it, or the relay kept there
// first (the caller then closes r). ok is false once the Person has
// closed: nothing is kept, and the caller closes r.
func (c *Company) KeepRelay(key string, r Relay) (kept Relay, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	if first := c.relays[key]; first != nil {
		return first, true
	}
	c.relays[key] = r
	return r, true
}

// close closes the relays.
func (c *Company) close() {
	c.mu.Lock()
	relays := slices.Collect(maps.Values(c.relays))
	c.closed = true
	c.relays, c.trackers = map[string]Relay{}, map[conversation.Owner]*conversation.Tracker{}
	c.mu.Unlock()
	for _, r := range relays {
		_ = r.Close()
	}
}
