package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// Options configure a Person. The zero value of each field is documented.
type Options struct {
	// Agent is poppy-mcp's Agent; the Person acts through its view on the
	// person's store (auth.Agent.WithStore). Nil: no identity, so no
	// Session (Person.Sessions is nil).
	Agent *auth.Agent
	// Store is the store every person shares; the Person uses its own view
	// (store.Store.ForUser). Required with Agent; nil otherwise means
	// nothing is kept.
	Store *store.Store
	// Spawn runs background work until the server closes (a
	// tools.Server's background): f must return soon after its context
	// ends. It reports false, without running f, once closing has begun.
	// Nil: go f(context.Background()).
	Spawn func(f func(context.Context)) bool
	// Logger receives what the Person's Sessions could not save or
	// claim. Nil discards it.
	Logger *slog.Logger
	// Now is the clock of the Person's activity (IdleSince) and of their
	// sign-ins. Nil: time.Now.
	Now func() time.Time
	// Open returns the Session of the person ctx acts for with the Company
	// through domain, starting one when needed: the MCP layer's, which
	// discovers the Company. The person's sign-ins use it to adopt a
	// sign-in another replica finished and to poll one taken over. Nil:
	// they do neither.
	Open func(ctx context.Context, domain string) (*auth.Session, error)
	// Detach returns a context for work that outlives the request of ctx
	// (device polling) and keeps what its log lines need. Nil:
	// context.WithoutCancel.
	Detach func(ctx context.Context) context.Context
	// SigningIn runs as a device sign-in's polling starts, and the
	// function it returns as it stops (metrics). Nil: nothing.
	SigningIn func() (done func())
}

// Person is everything poppy-mcp holds in memory for one local user. It is
// safe for concurrent use; see the package documentation for its locks.
type Person struct {
	user     mcpauth.User // the zero User for the one person of a single-user deployment
	key      string       // user.Key()
	store    *store.Store // the person's view; nil without a store
	agent    *auth.Agent  // the person's view; nil without an identity
	sessions *auth.Sessions
	signIns  *auth.SignIns
	spawn    func(f func(context.Context)) bool
	now      func() time.Time

	// ctx ends at Close: the Person's background work stops with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the background work running

	// mu guards everything below.
	mu        sync.Mutex
	companies map[string]*Company // by issuer
	busy      int                 // calls and streams in flight (Begin)
	lastUsed  time.Time           // when the last of them ended
	closed    bool
	announced map[string]map[string]string // tool-name prefix -> tool name -> its definition
}

// New returns the Person of user: user.Key() names their view of the store.
func New(user mcpauth.User, opts *Options) *Person {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Spawn == nil {
		o.Spawn = func(f func(context.Context)) bool { go f(context.Background()); return true }
	}
	p := &Person{user: user, key: user.Key(), store: o.Store, agent: o.Agent, spawn: o.Spawn, now: o.Now,
		companies: map[string]*Company{}, announced: map[string]map[string]string{}, lastUsed: o.Now()}
	if p.store != nil && p.key != "" {
		p.store = p.store.ForUser(p.key)
	}
	if p.agent != nil && p.key != "" {
		p.agent = p.agent.WithStore(p.store)
	}
	if p.agent != nil && p.store != nil {
		p.sessions = auth.NewSessions(p.agent, p.store, o.Logger)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.signIns = auth.NewSignIns(p.sessions, p.store, p.signInOptions(&o))
	return p
}

// signInOptions are the options of the person's sign-ins.
func (p *Person) signInOptions(o *Options) *auth.SignInsOptions {
	so := &auth.SignInsOptions{Go: p.Go, Detach: o.Detach, Owner: OwnerOf(p.user), SigningIn: o.SigningIn, Logger: o.Logger, Now: o.Now}
	if o.Open != nil {
		so.Open = func(ctx context.Context, domain string) (*auth.Session, error) {
			return o.Open(p.WithPerson(ctx), domain)
		}
	}
	return so
}

// OwnerOf is what a kept sign-in records of the person it is for
// (auth.DeviceFlow.Owner), so that a replica taking it over acts for that
// person: the person's (issuer, sub) as JSON, kept encrypted with the rest
// of the sign-in; "" for the one person of a single-user deployment.
func OwnerOf(person mcpauth.User) string {
	if person.IsZero() {
		return ""
	}
	b, _ := json.Marshal([2]string{person.Issuer, person.Subject})
	return string(b)
}

// OwnerContext returns ctx acting for the person a kept sign-in of the
// local user key is for, and whether that person is known and is key's.
func OwnerContext(ctx context.Context, key string, kept *auth.DeviceFlow) (context.Context, bool) {
	return OwnerOfKey(ctx, key, kept.Owner)
}

// OwnerOfKey returns ctx acting for the person owner (OwnerOf's value,
// kept with what was done for them: a sign-in, a page) names, and
// whether that person is known and is the local user key's.
func OwnerOfKey(ctx context.Context, key, owner string) (context.Context, bool) {
	if key == "" {
		return ctx, owner == ""
	}
	var pair [2]string
	if json.Unmarshal([]byte(owner), &pair) != nil {
		return ctx, false
	}
	person := mcpauth.User{Issuer: pair[0], Subject: pair[1]}
	return mcpauth.WithUser(ctx, person), person.Key() == key
}

// User returns the person; the zero User in a single-user deployment.
func (p *Person) User() mcpauth.User { return p.user }

// Key returns the local user key; "" in a single-user deployment.
func (p *Person) Key() string { return p.key }

// Store returns the person's view of the store; nil without a store.
func (p *Person) Store() *store.Store { return p.store }

// Agent returns the person's view of the Agent; nil without an identity.
func (p *Person) Agent() *auth.Agent { return p.agent }

// Sessions returns the person's Sessions; nil without an identity or a
// store.
func (p *Person) Sessions() *auth.Sessions { return p.sessions }

// SignIns returns the person's sign-ins.
func (p *Person) SignIns() *auth.SignIns { return p.signIns }

// WithPerson returns ctx acting for the person (mcpauth.WithUser), for
// what is done or logged for them outside one of their requests.
func (p *Person) WithPerson(ctx context.Context) context.Context {
	if p.user.IsZero() {
		return ctx
	}
	return mcpauth.WithUser(ctx, p.user)
}

// Company returns the person's state at the Company issuer, creating it.
func (p *Person) Company(issuer string) *Company {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.companies[issuer]
	if c == nil {
		c = newCompany(p, issuer)
		p.companies[issuer] = c
	}
	return c
}

// Known returns the person's state at the Company issuer, or nil when
// they have not used it.
func (p *Person) Known(issuer string) *Company {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.companies[issuer]
}

// Companies returns the person's state at every Company used, by issuer.
func (p *Person) Companies() []*Company {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.companies))
}

// Begin records a call or stream of the person in flight; end records
// that it ended. A Person is idle only with none in flight.
func (p *Person) Begin() (end func()) {
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.busy--
			p.lastUsed = p.now()
			p.mu.Unlock()
		})
	}
}

// IdleSince reports since when the person has been idle: no call or
// stream in flight and no sign-in pending (a pending sign-in waits on the
// user, its page or its polling here). ok is false while they are not.
func (p *Person) IdleSince() (since time.Time, ok bool) {
	p.mu.Lock()
	busy, since := p.busy, p.lastUsed
	p.mu.Unlock()
	if busy > 0 || p.signIns.Pending() {
		return time.Time{}, false
	}
	return since, true
}

// Go runs f as background work of the person: its context ends when the
// Person closes or the server's background does, and Close waits for it.
// It reports false, without running f, once either has begun closing.
func (p *Person) Go(f func(ctx context.Context)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	ok := p.spawn(func(bg context.Context) {
		defer p.wg.Done()
		ctx, cancel := context.WithCancel(p.ctx)
		defer cancel()
		stop := context.AfterFunc(bg, cancel)
		defer stop()
		f(ctx)
	})
	if !ok {
		p.wg.Done()
	}
	return ok
}

// Close drops what the Person holds in memory: it stops their background
// work and waits for it, stops their sign-ins, closes their relays, and
// gives back the claims on their Sessions (auth.Sessions.Close), so that
// another replica, or this one when they come back, continues them from
// the store. Nothing is started for the Person after Close.
func (p *Person) Close() {
	p.mu.Lock()
	p.closed = true
	companies := slices.Collect(maps.Values(p.companies))
	p.companies, p.announced = map[string]*Company{}, map[string]map[string]string{}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.signIns.Close()
	for _, c := range companies {
		c.close()
	}
	if p.sessions != nil {
		p.sessions.Close()
	}
}

// Closed reports whether Close has begun.
func (p *Person) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// StartAnnouncing records that the tools of the Company prefix are
// announced to the person from now on (none yet, if it is new).
func (p *Person) StartAnnouncing(prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.announced[prefix] == nil {
		p.announced[prefix] = map[string]string{}
	}
}

// Announced returns the tools announced to the person under prefix, each
// name with its definition, and whether StartAnnouncing ran for it.
func (p *Person) Announced(prefix string) (map[string]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tools, ok := p.announced[prefix]
	return maps.Clone(tools), ok
}

// SetAnnounced records the tools announced to the person under prefix.
func (p *Person) SetAnnounced(prefix string, tools map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.announced[prefix] = maps.Clone(tools)
}
