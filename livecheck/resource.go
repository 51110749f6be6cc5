package livecheck

// This file probes the Company's resources (Poppy 0.1 §4.3, §6): it finds
// one API request a signed-out Session Token may make, a GET of an OpenAPI
// operation without required parameters, and sends it again broken in one
// way at a time. A Company that answers a broken request as it answers the
// valid one accepted what it must refuse.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/openapi2tools"
)

// maxReadTries bounds how many operations api.read sends before giving up.
const maxReadTries = 5

// target is the API request the resource probes break.
type target struct {
	url      string // GET; it may have a query
	name     string // for messages
	resource string // the resource its API takes tokens of; "" for general tokens
	// control is the answer to the valid request: a broken one answered
	// the same way was accepted.
	control *exchange
}

// call is one request to a resource.
type call struct {
	url    string // query included
	method string // zero: GET
	scheme string // of Authorization: "DPoP", "Bearer", or "" for none
	token  auth.Secret
	key    *auth.ProofKey // signs the DPoP proof (with ath of token); nil: none
	htm    string         // the proof's htm; zero: the request's method
	htu    string         // the proof's htu; zero: the request's URL
	body   []byte         // JSON
}

// call sends c, answering one use_dpop_nonce with the nonce it names.
func (r *run) call(ctx context.Context, c call) (*exchange, error) {
	if c.method == "" {
		c.method = http.MethodGet
	}
	return r.send(ctx, c.url, func(nonce string) (*http.Request, error) {
		var body *strings.Reader
		if c.body != nil {
			body = strings.NewReader(string(c.body))
		}
		req, err := newRequest(c.method, c.url, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		if c.scheme != "" {
			req.Header.Set("Authorization", c.scheme+" "+c.token.Reveal())
		}
		if c.key != nil {
			p, err := c.key.Proof(cmpOr(c.htm, c.method), cmpOr(c.htu, c.url), c.token, nonce)
			if err != nil {
				return nil, err
			}
			req.Header.Set("DPoP", p)
		}
		return req, nil
	}, true)
}

func newRequest(method, u string, body *strings.Reader) (*http.Request, error) {
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequest(method, u, body)
	} else {
		req, err = http.NewRequest(method, u, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("livecheck: %s: %w", method, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func cmpOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// tokenAt is the main Session's token for t: issued for t's resource when
// it has one.
func (r *run) tokenAt(ctx context.Context, t *target) (auth.Secret, error) {
	if t.resource == "" {
		return r.main.token, nil
	}
	return r.resourceToken(ctx, t.resource)
}

// valid sends t as a valid request of the main Session.
func (r *run) valid(ctx context.Context, t *target) (*exchange, error) {
	tok, err := r.tokenAt(ctx, t)
	if err != nil {
		return nil, err
	}
	return r.call(ctx, call{url: t.url, scheme: "DPoP", token: tok, key: r.main.key})
}

// accountNeeded reports an answer that knew the token and wants an account (§6).
func accountNeeded(x *exchange) bool {
	_, code := errorCode(x)
	return code == "sign_in_required" || code == "insufficient_scope"
}

// checkRead finds the target: the first GET without required parameters
// that answers a signed-out Session Token (Poppy 0.1 §6: "Every listed API
// MUST accept Session Tokens as described in 4.3").
func (r *run) checkRead(ctx context.Context) outcome {
	var tried []string
	var fallback *target
	for _, t := range r.candidates(ctx, &tried) {
		x, err := r.valid(ctx, t)
		if err != nil {
			return unavailable(t.name, err)
		}
		t.control = x
		switch {
		case x.status/100 == 2:
			r.target = t
			if len(tried) > 0 {
				return pass("%s answered %s to a signed-out Session Token (before it: %s)", t.name, statusLine(x), strings.Join(tried, "; "))
			}
			return pass("%s answered %s to a signed-out Session Token", t.name, statusLine(x))
		case accountNeeded(x):
			if fallback == nil {
				fallback = t
			}
			tried = append(tried, t.name+": "+statusLine(x))
		case x.status == http.StatusUnauthorized:
			return fail("%s refused a valid Session Token and proof: %s", t.name, statusLine(x))
		default:
			tried = append(tried, t.name+": "+statusLine(x))
		}
	}
	if fallback != nil {
		r.target = fallback
		return skip("no read-only operation answered a signed-out Session (%s); the probes below use %s, which knows the token and asks for an account",
			strings.Join(tried, "; "), fallback.name)
	}
	return r.fallbackTarget(ctx, tried)
}

// fallbackTarget makes the target a read of an unknown conversation, which
// a valid token gets conversation_not_found for (Poppy 0.1 §7.13).
func (r *run) fallbackTarget(ctx context.Context, tried []string) outcome {
	why := "no OpenAPI operation without required parameters"
	switch {
	case len(r.ep.openapi) == 0:
		why = "the Company lists no OpenAPI API"
	case len(tried) > 0:
		why = "no read-only operation answered (" + strings.Join(tried, "; ") + ")"
	}
	if r.unknown == "" {
		return skip("%s, and no conversations to probe instead", why)
	}
	t := r.unknownTarget()
	if o, ok := r.control(ctx, t); !ok {
		return o
	}
	r.target = t
	return skip("%s; the probes below use %s, which a valid token gets %s for", why, t.name, statusLine(t.control))
}

// unknownTarget is a read of a conversation that does not exist: a
// general service (no resource) that changes nothing.
func (r *run) unknownTarget() *target {
	return &target{url: r.unknown, name: "GET " + r.ep.conversations + "/{an unknown id}/events"}
}

// control sends t as a valid request of the main Session and keeps the
// answer as t.control. A refusal of it is the Company's failure, and
// nothing can be probed against t.
func (r *run) control(ctx context.Context, t *target) (outcome, bool) {
	x, err := r.valid(ctx, t)
	if err != nil {
		return unavailable(t.name, err), false
	}
	if x.status == http.StatusUnauthorized || x.status == http.StatusForbidden {
		return fail("%s refused a valid Session Token and proof: %s", t.name, statusLine(x)), false
	}
	t.control = x
	return outcome{}, true
}

// candidates are the GET operations without required parameters of the
// Company's OpenAPI documents (the first two), at most maxReadTries.
// What could not be read is added to tried.
func (r *run) candidates(ctx context.Context, tried *[]string) []*target {
	var out []*target
	for _, api := range r.ep.openapi[:min(2, len(r.ep.openapi))] {
		cat, err := r.loadAPI(ctx, api)
		if err != nil {
			*tried = append(*tried, api.URL+": "+err.Error())
			continue
		}
		for _, tool := range cat.Tools {
			if tool.Method != http.MethodGet || len(out) == maxReadTries {
				continue
			}
			req, err := cat.NewRequest(ctx, tool.Name, nil)
			if err != nil {
				continue // it has required parameters
			}
			name := "GET " + shown(req.URL)
			if tool.OperationID != "" {
				name += " (" + tool.OperationID + ")"
			}
			out = append(out, &target{url: req.URL.String(), name: name, resource: api.Resource})
		}
	}
	return out
}

// loadAPI fetches and reads one OpenAPI document.
func (r *run) loadAPI(ctx context.Context, api discovery.API) (*openapi2tools.Catalog, error) {
	f, err := r.docs.FetchDocument(ctx, discovery.DocumentRequest{URL: api.URL,
		Accept: "application/json, application/yaml;q=0.9, */*;q=0.1", MaxBytes: openapi2tools.MaxDocumentBytes})
	if err != nil {
		return nil, fmt.Errorf("could not fetch it: %w", err)
	}
	return openapi2tools.Load(ctx, f.Body, f.URL, &openapi2tools.Options{Resource: api.Resource})
}

// checkResourceNonce judges how the target's API asked for a DPoP nonce.
func (r *run) checkResourceNonce(context.Context) outcome {
	if r.target == nil {
		return skip("no API request to probe with")
	}
	o := origin(r.target.url)
	return r.judgeNonce(func(e nonceEvent) bool { return e.origin == o && !r.atToken(e) }, true, o, "the API")
}

// accepted reports whether x is answered as the valid request was.
func accepted(x, control *exchange) bool {
	if x.status/100 == 2 {
		return true
	}
	_, code := errorCode(x)
	_, want := errorCode(control)
	return x.status == control.status && code == want
}

// checkNoToken sends the target with no Session Token.
// Poppy 0.1 §6: errors "are returned in the WWW-Authenticate header (RFC 9449 ...)".
func (r *run) checkNoToken(ctx context.Context) outcome {
	t := r.target
	if t == nil {
		return skip("no API request to probe with")
	}
	x, err := r.call(ctx, call{url: t.url})
	if err != nil {
		return unavailable("the request without a token", err)
	}
	dpop, code := challenge(x, "DPoP")
	switch {
	case accepted(x, t.control):
		return fail("%s answered a request with no Session Token (%s) as it answers a valid one; §4.3: every API request carries one, and §6 refuses one without with 401", t.name, statusLine(x))
	case x.status != http.StatusUnauthorized:
		return fail("%s answered a request with no Session Token with %s, not 401", t.name, statusLine(x))
	case !dpop:
		return fail("%s answered a request with no Session Token with 401 but no WWW-Authenticate: DPoP challenge (RFC 9449 §7.1)", t.name)
	case code != "":
		// RFC 6750 §3.1: "If the request lacks any authentication information ... the resource server SHOULD NOT include an error code"
		return warn("a request with no Session Token gets 401 with a DPoP challenge, but error=%s in it: with no authentication information there SHOULD be no error code (RFC 6750 §3.1)", code)
	}
	return pass("a request with no Session Token gets 401 with WWW-Authenticate: DPoP")
}

// judgeRefusal judges the answer to a request the Company must refuse:
// answered as the valid one was, it was accepted (a security bug); it
// must be refused with a WWW-Authenticate challenge and, when want lists
// any, one of those codes (Poppy 0.1 §4.3: "Failed checks return
// invalid_dpop_proof or use_dpop_nonce with the WWW-Authenticate: DPoP header").
func judgeRefusal(x, control *exchange, what string, want ...string) outcome {
	dpop, _ := challenge(x, "DPoP")
	bearer, _ := challenge(x, "Bearer")
	_, code := errorCode(x)
	switch {
	case accepted(x, control):
		return breach("accepted %s: %s, as for a valid request", what, statusLine(x))
	case x.status != http.StatusUnauthorized && x.status != http.StatusForbidden && x.status != http.StatusBadRequest:
		return fail("answered %s with %s: neither what a valid request gets nor a refusal", what, statusLine(x))
	case !dpop && !bearer:
		return fail("refused %s (%s) without a WWW-Authenticate challenge", what, statusLine(x))
	case len(want) > 0 && !slices.Contains(want, code):
		return fail("refused %s, but with %s; the error for it is %s", what, statusLine(x), strings.Join(want, " or "))
	}
	return pass("refused %s: %s", what, statusLine(x))
}

// badRequest is one way to break the target request.
type badRequest struct {
	what string
	call func(r *run, t *target, tok auth.Secret) call
	want []string
}

var (
	badHTM = badRequest{"a DPoP proof signed for POST on a GET", func(r *run, t *target, tok auth.Secret) call {
		return call{url: t.url, scheme: "DPoP", token: tok, key: r.main.key, htm: http.MethodPost}
	}, []string{"invalid_dpop_proof"}}
	badHTU = badRequest{"a DPoP proof signed for another URL", func(r *run, t *target, tok auth.Secret) call {
		return call{url: t.url, scheme: "DPoP", token: tok, key: r.main.key, htu: origin(t.url) + "/poppy-mcp-check/elsewhere"}
	}, []string{"invalid_dpop_proof"}}
	badKey = badRequest{"a DPoP proof signed by another key than the token is bound to", func(r *run, t *target, tok auth.Secret) call {
		return call{url: t.url, scheme: "DPoP", token: tok, key: r.otherKey}
	}, []string{"invalid_dpop_proof"}}
	badNoProof = badRequest{"a DPoP Session Token without a DPoP proof", func(r *run, t *target, tok auth.Secret) call {
		return call{url: t.url, scheme: "DPoP", token: tok}
	}, []string{"invalid_dpop_proof"}}
	badBearer = badRequest{"a DPoP-bound Session Token sent as a Bearer token, without a proof", func(r *run, t *target, tok auth.Secret) call {
		// Poppy 0.1 §4.3: Companies "MUST require DPoP everywhere else" than MCP
		return call{url: t.url, scheme: "Bearer", token: tok}
	}, nil}
)

// proofProbe sends the target broken as b says, with the main Session's token.
func proofProbe(b badRequest) func(r *run, ctx context.Context) outcome {
	return func(r *run, ctx context.Context) outcome {
		t := r.target
		if t == nil {
			return skip("no API request to probe with")
		}
		tok, err := r.tokenAt(ctx, t)
		if err != nil {
			return unavailable(b.what, err)
		}
		if r.otherKey == nil {
			k, err := auth.GenerateKey()
			if err != nil {
				return fail("%v", err)
			}
			r.otherKey = auth.NewProofKey(k)
		}
		o, x := r.mustRefuse(ctx, b.call(r, t, tok), t.control, b.what+" ("+t.name+")", b.want...)
		if x == nil || o.status != Failed || o.security {
			return o
		}
		if _, code := errorCode(x); code == "invalid_token" && slices.Contains(b.want, "invalid_dpop_proof") {
			return warn("refused %s with invalid_token; §4.3 names invalid_dpop_proof for a failed proof check, and invalid_token makes an agent renew its token for nothing", b.what)
		}
		return o
	}
}

// mustRefuse sends c, which the Company must refuse, and judges the answer
// against control (judgeRefusal: accepting it is a security bug). The
// answer is nil when c could not be sent.
func (r *run) mustRefuse(ctx context.Context, c call, control *exchange, what string, want ...string) (outcome, *exchange) {
	x, err := r.call(ctx, c)
	if err != nil {
		return unavailable(what, err), nil
	}
	return judgeRefusal(x, control, what, want...), x
}

// checkQueryToken starts a Session for this probe alone and sends its
// token in the URL. Poppy 0.1 §4.3: "Companies MUST NOT accept them from one."
func (r *run) checkQueryToken(ctx context.Context) outcome {
	t := r.target
	if t == nil {
		return skip("no API request to probe with")
	}
	s, _, _, err := r.startSession(ctx)
	if err != nil {
		return unavailable("starting the Session for this probe", err)
	}
	tok := s.token
	if t.resource != "" {
		x, err := r.postToken(ctx, grant{assertion: r.sessionAssertion(), sessionID: s.id, resource: t.resource, key: s.key})
		if err != nil {
			return unavailable("the resource token for this probe", err)
		}
		tr, err := issued(x)
		if err != nil {
			return fail("the token endpoint issued no token for resource %s: %v", t.resource, err)
		}
		tok = auth.NewSecret(tr.accessToken)
	}
	u, _ := url.Parse(t.url)
	q := u.Query()
	q.Set("access_token", tok.Reveal())
	u.RawQuery = q.Encode()
	o, _ := r.mustRefuse(ctx, call{url: u.String(), token: tok, key: s.key}, t.control,
		"a Session Token in the query string (?access_token=) with no Authorization header")
	return o
}
