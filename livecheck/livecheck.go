// Package livecheck probes a running Company the way `poppy-mcp check
// --live` does, for the people who build a Company's Poppy side: whether a
// Session starts as Poppy 0.1 §4.2 says, whether its APIs (§6), sign-in
// endpoints (§4.4-4.9) and, when asked, conversations (§7) answer as they
// must, and above all whether it refuses what it must refuse (§4.2, §4.3):
// a replayed or wrong assertion, a DPoP proof for another request or key, a
// request without a proof, a Session Token in a URL.
//
// It runs under the agent's own identity (the Company must be able to fetch
// its client_id), starts only signed-out Sessions, never signs in, never
// sends anything but GET to an API, and sends at most Options.MaxRequests
// requests, every retry and document included, honouring Retry-After.
// Some probes break the protocol on purpose under that identity, and Poppy
// 0.1 §4.1 lets a Company revoke a client_id that misuses the protocol:
// probe with a test identity of its own.
//
// Every probe is a Check with the section it comes from. A Company that
// accepts what it must refuse has a security bug: that Check is an error
// with Security set.
package livecheck

import (
	"context"
	"net/http"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
)

// DefaultMaxRequests is how many requests a run sends at most, unless
// Options.MaxRequests says otherwise.
const DefaultMaxRequests = 100

// Options configure a Checker. A nil *Options means all defaults.
type Options struct {
	// Transport sends every request, discovery's included; poppy-mcp gives
	// the network guard's. Zero: http.DefaultTransport.
	Transport http.RoundTripper
	// Holds keeps the Retry-After of every 429, per endpoint (Poppy 0.1
	// §4.3). Zero: the run's own.
	Holds *retryafter.Holds
	// MaxRequests bounds how many requests one run sends, documents,
	// retries and waits for a nonce included; the probes left when it is
	// spent are skipped. Zero: DefaultMaxRequests.
	MaxRequests int
	// MaxWait is the longest a 429's Retry-After is waited out; a probe
	// held longer is skipped. Zero: 60 s.
	MaxWait time.Duration
	// Timeout bounds each request. Zero: 30 s.
	Timeout time.Duration
	// Conversations adds the probes of §7, which start a conversation at
	// the Company (and close it). Zero: conversations are not probed.
	Conversations bool
}

// Checker probes Companies under one identity. It is safe for concurrent
// use; each Run is independent.
type Checker struct {
	id   *auth.Identity
	opts Options
}

// New returns a Checker that probes as id, whose client_id document and
// key set the Company must be able to fetch (Poppy 0.1 §4.1).
func New(id *auth.Identity, opts *Options) *Checker {
	c := &Checker{id: id}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Transport == nil {
		c.opts.Transport = http.DefaultTransport
	}
	if c.opts.MaxRequests <= 0 {
		c.opts.MaxRequests = DefaultMaxRequests
	}
	if c.opts.MaxWait <= 0 {
		c.opts.MaxWait = 60 * time.Second
	}
	if c.opts.Timeout <= 0 {
		c.opts.Timeout = 30 * time.Second
	}
	return c
}

// Status is a Check's verdict.
type Status string

// The verdicts of a Check.
const (
	// Passed: the Company did what the section says.
	Passed Status = "ok"
	// Failed: it did not. With Security set, it accepted what it must refuse.
	Failed Status = "error"
	// Warned: it did what the section allows but advises against.
	Warned Status = "warning"
	// Skipped: the probe did not apply, or could not run; Message says why.
	Skipped Status = "skipped"
)

// Check is one probe's verdict.
type Check struct {
	// ID names the probe, such as "refuse.replayed_jti"; it is stable.
	ID string `json:"id"`
	// Section is the rule's section of Poppy 0.1 ("4.3"), or an RFC's.
	Section string `json:"section"`
	Status  Status `json:"status"`
	// Security marks a Failed probe of something the Company must refuse
	// and accepted: a security bug.
	Security bool `json:"security,omitempty"`
	// Message says what was sent and what came back. It holds no secret.
	Message string `json:"message"`
}

// Report is what a run found.
type Report struct {
	// Domain is the Company's domain as discovery normalized it.
	Domain string `json:"domain"`
	// ClientID is the identity the probes ran under.
	ClientID string `json:"client_id"`
	// Findings are the discovery documents' findings, as `check` reports them.
	Findings []discovery.Finding `json:"findings"`
	// Usable is false when a finding blocks use; the probes then did not run.
	Usable bool `json:"usable"`
	// Checks are the probes, in the order they ran.
	Checks []Check `json:"checks"`
	// Requests is how many requests the run sent, out of MaxRequests.
	Requests    int `json:"requests"`
	MaxRequests int `json:"max_requests"`
}

// OK reports whether nothing failed: no error finding and no Failed check.
func (r *Report) OK() bool {
	for _, f := range r.Findings {
		if f.Severity == discovery.Error {
			return false
		}
	}
	for _, c := range r.Checks {
		if c.Status == Failed {
			return false
		}
	}
	return true
}

// Error reports that a run could not check the Company at all: its
// documents could not be read, or no Session could start.
type Error struct {
	// What is what could not be done, such as "start a Session".
	What string
	Err  error
}

func (e *Error) Error() string { return "livecheck: could not " + e.What + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Run discovers the Company at domain and probes it. The Report is
// returned even with an *Error, with what was found before.
func (c *Checker) Run(ctx context.Context, domain string) (*Report, error) {
	r, err := c.start(ctx, domain)
	if err != nil || !r.rep.Usable {
		return r.report(), err
	}
	for _, p := range probes {
		if ctx.Err() != nil && r.fatal == nil {
			r.fatal = &Error{What: "finish the probes", Err: ctx.Err()}
		}
		r.runProbe(ctx, p)
	}
	return r.report(), r.fatal
}

// Step is one probe a run would send, for --dry-run.
type Step struct {
	ID      string `json:"id"`
	Section string `json:"section"`
	// Does says what the probe sends; Skip, when set, why it would not run.
	Does string `json:"does"`
	Skip string `json:"skip,omitempty"`
}

// Plan discovers the Company at domain (reading its public documents only)
// and lists the probes Run would send, sending none of them.
func (c *Checker) Plan(ctx context.Context, domain string) ([]Step, *Report, error) {
	r, err := c.start(ctx, domain)
	if err != nil || !r.rep.Usable {
		return nil, r.report(), err
	}
	var steps []Step
	for _, p := range probes {
		steps = append(steps, Step{ID: p.id, Section: p.section, Does: p.does(&r.ep), Skip: p.applies(r)})
	}
	return steps, r.report(), nil
}
