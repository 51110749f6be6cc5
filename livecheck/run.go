package livecheck

// This file is one run: the Company's endpoints as discovery found them,
// the state the probes share (the Sessions they started, the API they
// probe), and the loop that turns each probe's outcome into a Check.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
)

// endpoints are what the probes need of the Company's documents.
type endpoints struct {
	token         string // token_endpoint
	revocation    string // revocation_endpoint
	device        string // device_authorization_endpoint, when auth.device is offered
	mediated      string // auth.mediated.endpoint
	mediatedScope string // the first scope Mediated Sign-In grants
	conversations string // the endpoint of the poppy conversation protocol
	openapi       []discovery.API
	mcp           []string // the url of every MCP API
}

// run is one Run or Plan. Probes run one after another, so it needs no lock.
type run struct {
	c     *Checker
	ep    endpoints
	rep   Report
	hc    *http.Client // for probes: no redirects
	docs  *discovery.Client
	spent *budget
	holds *retryafter.Holds
	fatal error // set when a probe found that nothing more can be checked

	nonces   map[string]string // origin -> the latest DPoP-Nonce it sent a probe
	nonceLog []nonceEvent
	userID   string                 // a User ID of this run alone
	main     *session               // the Session most probes use
	startX   *exchange              // the answer that started it
	otherKey *auth.ProofKey         // a DPoP key no token is bound to
	target   *target                // the API request the resource probes are sent as
	resTok   map[string]auth.Secret // resource -> the main Session's token for it
	conv     convState
	unknown  string // the events URL of a conversation that does not exist
}

// start discovers the Company and sets the run up.
func (c *Checker) start(ctx context.Context, domain string) (*run, error) {
	r := &run{c: c, spent: &budget{next: c.opts.Transport, max: c.opts.MaxRequests},
		holds: c.opts.Holds, nonces: map[string]string{}, resTok: map[string]auth.Secret{}}
	if r.holds == nil {
		r.holds = &retryafter.Holds{}
	}
	r.hc = &http.Client{Transport: r.spent, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r.docs = discovery.New(&http.Client{Transport: r.spent}, &discovery.Options{Holds: r.holds})
	r.rep = Report{Domain: domain, ClientID: c.id.ClientID(), Findings: []discovery.Finding{}, Checks: []Check{}, MaxRequests: c.opts.MaxRequests}
	co, err := r.docs.Discover(ctx, domain, true)
	if co != nil {
		r.rep.Domain, r.rep.Usable = co.Domain, co.OK()
		if co.Findings != nil {
			r.rep.Findings = co.Findings
		}
	}
	if err != nil {
		return r, &Error{What: "read the Company's documents", Err: err}
	}
	if !r.rep.Usable {
		return r, nil // the findings say why; nothing is probed
	}
	if co.Document.Auth == nil || co.Metadata == nil {
		return r, &Error{What: "probe the Company", Err: errors.New("its poppy.json names no auth.issuer: it offers no Sessions")}
	}
	r.ep = endpointsOf(co)
	r.userID = "usr_check_" + randomID()
	if r.ep.conversations != "" {
		r.unknown = r.ep.conversations + "/cnv_check_" + randomID() + "/events"
	}
	return r, nil
}

// endpointsOf takes the endpoints from what discovery found.
func endpointsOf(co *discovery.Company) endpoints {
	doc, md := co.Document, co.Metadata
	e := endpoints{token: md.TokenEndpoint, revocation: md.RevocationEndpoint}
	if doc.Auth.Device != nil {
		e.device = md.DeviceAuthorizationEndpoint
	}
	if m := doc.Auth.Mediated; m != nil && len(m.Scopes) > 0 {
		e.mediated, e.mediatedScope = m.Endpoint, m.Scopes[0]
	}
	if doc.Agent != nil {
		for _, p := range doc.Agent.Protocols {
			if p.Type == "poppy" && e.conversations == "" {
				e.conversations = strings.TrimSuffix(p.Endpoint, "/")
			}
		}
	}
	for _, api := range doc.APIs {
		switch api.Type {
		case "openapi":
			e.openapi = append(e.openapi, api)
		case "mcp":
			e.mcp = append(e.mcp, api.URL)
		}
	}
	// The APIs with a resource first: they are the ones the resource probes need.
	slices.SortStableFunc(e.openapi, func(a, b discovery.API) int {
		return boolOrder(a.Resource == "") - boolOrder(b.Resource == "")
	})
	return e
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// report returns the Report so far.
func (r *run) report() *Report {
	rep := r.rep
	rep.Requests = r.spent.used()
	return &rep
}

// runProbe runs p, unless it does not apply or nothing more can be sent,
// and records its Check.
func (r *run) runProbe(ctx context.Context, p probe) {
	var o outcome
	switch reason := p.applies(r); {
	case reason != "":
		o = skip("%s", reason)
	case r.fatal != nil:
		o = skip("not run: %s", strings.TrimPrefix(r.fatal.Error(), "livecheck: "))
	case r.spent.left() == 0:
		o = skip("not run: the run's %d requests are spent", r.c.opts.MaxRequests)
	default:
		o = p.run(r, ctx)
	}
	r.rep.Checks = append(r.rep.Checks, Check{ID: p.id, Section: p.section, Status: o.status,
		Security: o.security && o.status == Failed, Message: o.msg})
}

// unavailable turns an error that stopped a probe into its outcome: a
// spent budget or a rate limit skips it; anything else is a failure to
// reach the Company.
func unavailable(what string, err error) outcome {
	var rl *rateLimitedError
	switch {
	case errors.Is(err, errSpent):
		return skip("%s: not sent, the run's requests are spent", what)
	case errors.As(err, &rl):
		return skip("%s: not sent, %v", what, rl)
	}
	return fail("%s: %v", what, strings.TrimPrefix(err.Error(), "livecheck: "))
}

// randomID is 16 random bytes in base64url (128 bits, like a jti).
func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("livecheck: crypto/rand: %v", err)) // crypto/rand.Read never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
