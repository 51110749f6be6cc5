package main

// This file holds the runs. A run is a Company of its own (one
// poppytest.Server) on the shared Front, under its own domain, with its own
// options, scenario, agent and violations, so test suites side by side never
// touch each other's state. A run created with a client_id serves that agent
// only. Resetting a run starts its Company afresh with the same shape; its
// violations so far are kept, numbered on.

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// runSpec is what a run is made of: the body of POST /admin/runs.
type runSpec struct {
	// Name names the run in the admin API's paths. Zero: run-N.
	Name string `json:"name,omitempty"`
	// Domain is the Company's. Zero: the scenario's, else NAME.poppytest.test.
	Domain string `json:"domain,omitempty"`
	// ClientID binds the run to one agent. Zero: any agent.
	ClientID string `json:"client_id,omitempty"`
	// Agent is the agent's documents, served at its client_id and jwks_uri.
	// Nil: fetched from where the client_id names.
	Agent *agentDocs `json:"agent,omitempty"`
	// Scenario shapes the Company (the --scenario format, as JSON).
	Scenario json.RawMessage `json:"scenario,omitempty"`
	// Options are poppytest's options by name (GET /admin/knobs).
	Options map[string]json.RawMessage `json:"options,omitempty"`
}

// agentDocs are an agent's client metadata document and key set (§4.1).
type agentDocs struct {
	Client json.RawMessage `json:"client"`
	JWKS   json.RawMessage `json:"jwks"`
}

// run is one Company. Its fields are guarded by the registry's mu.
type run struct {
	name     string
	spec     runSpec
	scenario *poppytest.Scenario
	srv      *poppytest.Server
	rep      *poppytest.Reporter
	past     []poppytest.Violation // of the Companies before the last reset
	agentOn  bool                  // srv serves the agent's documents
	created  time.Time
}

// runViolation is a violation with the run it happened in.
type runViolation struct {
	Run string `json:"run"`
	poppytest.Violation
}

// registry is every run. Its methods are safe for concurrent use.
type registry struct {
	front       *poppytest.Front
	agentClient *http.Client        // fetches agents' documents (--agent-ca)
	scenario    *poppytest.Scenario // --scenario, for the default run
	log         *log.Logger         // violations as they happen

	// mu guards everything below, and every run.
	mu    sync.Mutex
	runs  map[string]*run
	order []string
	gone  []runViolation // of deleted runs
	seq   int            // for run-N names
}

// runName is the syntax of a run's name.
var runName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// create makes and starts a run.
func (g *registry) create(spec runSpec) (*run, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if spec.Name == "" {
		for spec.Name == "" || g.runs[spec.Name] != nil {
			g.seq++
			spec.Name = fmt.Sprintf("run-%d", g.seq)
		}
	}
	if !runName.MatchString(spec.Name) {
		return nil, badRequest(fmt.Sprintf("name %q: want 1 to 32 lowercase letters, digits and -", spec.Name))
	}
	if g.runs[spec.Name] != nil {
		return nil, conflict("a run named " + spec.Name + " exists")
	}
	r := &run{name: spec.Name, spec: spec, created: time.Now()}
	if err := g.startLocked(r); err != nil {
		return nil, err
	}
	g.runs[r.name] = r
	g.order = append(g.order, r.name)
	return r, nil
}

// startLocked starts r's Company from its spec; the caller holds mu.
func (g *registry) startLocked(r *run) error {
	opts, sc, err := g.optionsFor(r.spec)
	if err != nil {
		return err
	}
	if err := g.checkHostsLocked(r, opts.Domain); err != nil {
		return err
	}
	rep := &poppytest.Reporter{Log: func(msg string) { g.log.Printf("run %s: %s", r.name, msg) }}
	srv, err := startServer(rep, opts)
	if err != nil {
		rep.Close()
		return err
	}
	r.srv, r.rep, r.scenario, r.agentOn = srv, rep, sc, false
	if r.spec.Agent != nil {
		if err := g.registerAgentLocked(r, *r.spec.Agent); err != nil {
			rep.Close()
			return err
		}
	}
	return nil
}

// startServer starts a Server, turning its panics (a host another run
// has) into errors.
func startServer(rep *poppytest.Reporter, opts *poppytest.Options) (srv *poppytest.Server, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = conflict(fmt.Sprint(p))
		}
	}()
	return poppytest.NewServer(rep, opts), nil
}

// optionsFor turns a spec into the Options of its Company.
func (g *registry) optionsFor(spec runSpec) (*poppytest.Options, *poppytest.Scenario, error) {
	sc := g.scenario
	if spec.Name != "default" {
		sc = nil
	}
	if len(spec.Scenario) > 0 {
		parsed, err := poppytest.ParseScenario(spec.Scenario)
		if err != nil {
			return nil, nil, badRequest(strings.TrimPrefix(err.Error(), "poppytest: "))
		}
		sc = parsed
	}
	opts := &poppytest.Options{Front: g.front, ClientID: spec.ClientID, AgentClient: g.agentClient, Scenario: sc}
	if err := applyOptions(opts, spec.Options); err != nil {
		return nil, nil, badRequest(err.Error())
	}
	opts.Domain = spec.Domain
	if opts.Domain == "" && sc != nil {
		opts.Domain = sc.Domain
	}
	if opts.Domain == "" {
		opts.Domain = spec.Name + ".poppytest.test"
	}
	if !domainName.MatchString(opts.Domain) {
		return nil, nil, badRequest(fmt.Sprintf("domain %q is not a lowercase domain name such as shop.test", opts.Domain))
	}
	opts.AgentHost = "agent.example"
	if spec.ClientID != "" {
		u, err := url.Parse(spec.ClientID)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			// Poppy 0.1 §4.1: "A Personal Agent's client_id MUST be an HTTPS URL that returns its metadata document."
			return nil, nil, badRequest(fmt.Sprintf("client_id %q is not an https URL", spec.ClientID))
		}
		opts.AgentHost = strings.ToLower(u.Hostname())
	}
	return opts, sc, nil
}

// domainName is the syntax of a run's domain.
var domainName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$`)

// checkHostsLocked refuses a domain whose hosts another run serves.
func (g *registry) checkHostsLocked(r *run, domain string) error {
	for _, h := range []string{domain, "www." + domain, "auth." + domain, "api." + domain, "mcp." + domain} {
		if g.front.Serves(h) {
			return conflict(fmt.Sprintf("%s is served by run %s; give this run another domain", h, g.ownerLocked(h)))
		}
	}
	return nil
}

// ownerLocked names the run that serves host; the caller holds mu.
func (g *registry) ownerLocked(host string) string {
	for _, name := range g.order {
		if rr := g.runs[name]; rr != nil && slices.Contains(rr.srv.Hosts(), host) && (host != rr.srv.AgentHost() || rr.agentOn) {
			return name
		}
	}
	return "?"
}

// registerAgent serves the agent's documents for r.
func (g *registry) registerAgent(r *run, docs agentDocs) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.registerAgentLocked(r, docs); err != nil {
		return err
	}
	r.spec.Agent = &docs
	return nil
}

func (g *registry) registerAgentLocked(r *run, docs agentDocs) error {
	var md struct {
		ClientID string `json:"client_id"`
	}
	var keys map[string]any
	if json.Unmarshal(docs.Client, &md) != nil || json.Unmarshal(docs.JWKS, &keys) != nil {
		return badRequest(`want {"client": {the client metadata document}, "jwks": {the key set}}, both JSON objects`)
	}
	u, err := url.Parse(md.ClientID)
	host := r.srv.AgentHost()
	switch {
	case err != nil || u.Scheme != "https" || strings.ToLower(u.Hostname()) != host:
		return badRequest(fmt.Sprintf("client_id %q must be an https URL on the run's agent host %s (create a run with this client_id to use another host)", md.ClientID, host))
	case r.spec.ClientID != "" && md.ClientID != r.spec.ClientID:
		return badRequest(fmt.Sprintf("client_id %q: the run serves only %s", md.ClientID, r.spec.ClientID))
	case !r.agentOn && g.front.Serves(host):
		return conflict(fmt.Sprintf("%s serves the documents of run %s; bind this run to a client_id on another host", host, g.ownerLocked(host)))
	}
	r.srv.SetAgentDocuments(docs.Client, docs.JWKS)
	r.agentOn = true
	return nil
}

// get returns the run named name.
func (g *registry) get(name string) (*run, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[name]
	if r == nil {
		return nil, notFound("no run " + name + " (GET /admin/runs lists them)")
	}
	return r, nil
}

// list returns every run, in order of creation.
func (g *registry) list() []*run {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*run, 0, len(g.order))
	for _, name := range g.order {
		out = append(out, g.runs[name])
	}
	return out
}

// server is r's Company now; a reset replaces it.
func (g *registry) server(r *run) *poppytest.Server {
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.srv
}

// reset starts r's Company afresh with the same shape and agent, and with
// options when they are given. Its violations so far are kept.
func (g *registry) reset(r *run, options map[string]json.RawMessage) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	spec := r.spec
	if options != nil {
		spec.Options = options
	}
	if _, _, err := g.optionsFor(spec); err != nil {
		return err
	}
	r.past = r.violationsLocked()
	r.rep.Close()
	r.spec = spec
	return g.startLocked(r)
}

// remove closes the run; its violations stay for the summary.
func (g *registry) remove(r *run) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, v := range r.violationsLocked() {
		g.gone = append(g.gone, runViolation{Run: r.name, Violation: v})
	}
	r.rep.Close()
	delete(g.runs, r.name)
	g.order = slices.DeleteFunc(g.order, func(n string) bool { return n == r.name })
}

// violationsLocked is every violation of r, numbered across resets.
func (r *run) violationsLocked() []poppytest.Violation {
	out := slices.Clone(r.past)
	for _, v := range r.srv.ViolationRecords() {
		v.Seq += len(r.past)
		out = append(out, v)
	}
	return out
}

// violations is every violation of r.
func (g *registry) violations(r *run) []poppytest.Violation {
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.violationsLocked()
}

// allViolations is every violation of every run, deleted ones first.
func (g *registry) allViolations() []runViolation {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.gone)
	for _, name := range g.order {
		for _, v := range g.runs[name].violationsLocked() {
			out = append(out, runViolation{Run: name, Violation: v})
		}
	}
	return out
}

// closeAll closes every run and returns every violation found.
func (g *registry) closeAll() []runViolation {
	all := g.allViolations()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, name := range g.order {
		g.runs[name].rep.Close()
	}
	return all
}
