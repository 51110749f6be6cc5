// This file implements the Session transport (Poppy 0.1 §4.3, RFC 9449 §7):
// each request gets the Session Token and a fresh DPoP proof; use_dpop_nonce
// is retried once at once, invalid_token renews and retries once,
// sign_in_required renews with the Account Token and retries once (§4.4,
// §4.9), and a 429 holds back every request to that endpoint until its
// Retry-After.
// roundTrip is the policy; attempt is one straight try. The Bearer variant
// for the Company's MCP servers (Poppy 0.1 §4.3 "Bearer tokens", §6;
// RFC 6750 §2.1; RFC 8707) shares the policy.

package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
)

// authorizer is what differs between the DPoP and the Bearer transports.
type authorizer interface {
	// token returns the token to send, renewing it first if it is due.
	token(ctx context.Context) (*Token, error)
	// renewAfter returns a token newer than used.
	renewAfter(ctx context.Context, used *Token) (*Token, error)
	// authorize adds the token (and proof) to an outgoing request.
	authorize(r *http.Request, tok *Token) error
	// scheme is the WWW-Authenticate scheme errors come in.
	scheme() string
	// session is the Session the tokens are of.
	session() *Session
}

// sessionTransport is the DPoP transport of a Session.
type sessionTransport struct{ s *Session }

func (t *sessionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.s.a.roundTrip(req, t)
}

func (t *sessionTransport) token(ctx context.Context) (*Token, error) { return t.s.token(ctx) }

func (t *sessionTransport) renewAfter(ctx context.Context, used *Token) (*Token, error) {
	return t.s.renewAfter(ctx, used)
}

func (t *sessionTransport) scheme() string { return "DPoP" }

func (t *sessionTransport) session() *Session { return t.s }

func (t *sessionTransport) authorize(r *http.Request, tok *Token) error {
	// RFC 9449 §7.1: "the access token ... using the DPoP authentication scheme"
	// Poppy 0.1 §4.3: "MUST NOT send tokens in a URL"
	p, err := t.s.proof.Proof(r.Method, r.URL.String(), tok.AccessToken, t.s.a.nonces.get(origin(r.URL)))
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "DPoP "+tok.AccessToken.Reveal())
	r.Header.Set("DPoP", p)
	return nil
}

// retryState records which retries a request has used; each runs once.
type retryState struct {
	nonce, renew, rate, signIn bool
	// via is the Account Token the Session was renewed with on
	// sign_in_required, for the retry.
	via *Account
}

// roundTrip is the retry policy around attempt.
func (a *Agent) roundTrip(req *http.Request, az authorizer) (*http.Response, error) {
	ctx := req.Context()
	getBody, err := a.replayable(req)
	if err != nil {
		return nil, err
	}
	// A sign-out or forget by another process takes effect before this request.
	if err := az.session().sync(ctx); err != nil {
		return nil, err
	}
	ep := endpointOf(req.URL)
	var st retryState
	tok, err := az.token(ctx)
	for err == nil {
		if err = a.limits.wait(ctx, ep); err != nil {
			break
		}
		var resp *http.Response
		resp, err = a.attempt(req, getBody, az, tok)
		if err != nil {
			break
		}
		var retry bool
		if tok, retry, err = a.judge(ctx, resp, az, tok, &st); !retry && err == nil {
			return resp, nil
		}
	}
	return nil, err
}

// attempt sends one clone of req with the token.
func (a *Agent) attempt(req *http.Request, getBody func() (io.ReadCloser, error), az authorizer, tok *Token) (*http.Response, error) {
	r := req.Clone(req.Context())
	if getBody != nil {
		body, err := getBody()
		if err != nil {
			return nil, err
		}
		r.Body, r.GetBody = body, getBody
	}
	if err := az.authorize(r, tok); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	resp, err := a.transport().RoundTrip(r)
	if err != nil {
		return nil, err
	}
	a.observe(resp)
	return resp, nil
}

// judge decides what a response means. It returns retry true (with the
// token to use) after closing the response; otherwise it returns the
// response's error, or nil when resp goes to the caller as it is.
func (a *Agent) judge(ctx context.Context, resp *http.Response, az authorizer, tok *Token, st *retryState) (*Token, bool, error) {
	if resp.StatusCode == http.StatusTooManyRequests {
		ep := endpointOf(resp.Request.URL)
		drain(resp.Body)
		if !st.rate {
			st.rate = true
			return tok, true, nil // the next limits.wait waits, or fails with *RetryAfterError
		}
		return nil, false, a.limits.retryAfter(ep)
	}
	e := a.responseError(resp, az.scheme())
	if e == nil {
		return tok, false, nil
	}
	drain(resp.Body)
	switch {
	// RFC 9449 §8: "the client ... retries the request with the new nonce"; once.
	case e.Is(ErrUseDPoPNonce) && !st.nonce:
		st.nonce = true
		return tok, true, nil
	// docs/spec-readings.md "Error codes": invalid_token: "renew the Session Token ... and retry once".
	case e.Is(ErrInvalidToken) && !st.renew:
		st.renew = true
		next, err := az.renewAfter(ctx, tok)
		return next, err == nil, err
	case e.Is(ErrSignInRequired) && !st.signIn:
		st.signIn = true
		return a.signInAgain(ctx, az, st, e)
	case e.Is(ErrSignInRequired) && st.via != nil:
		// Poppy 0.1 §4.9: the Personal Agent "finds out when a request fails
		// with invalid_token or sign_in_required": a Session just renewed with
		// the Account Token is still not signed in, so the Company refused it.
		az.session().refuse(ctx, st.via)
	}
	return nil, false, e
}

// signInAgain answers a first sign_in_required: one sign_in_required is not
// yet a refusal. The token sent may be older than another task's sign-in
// (Poppy 0.1 §4.4: "one may still hold a signed-out token after another task
// signed in"), or the Company may have signed the Session out (§4.9). The
// Session is renewed with its Account Token, or the one held for its User,
// and the request retried once; with none, or refused, e is the answer.
func (a *Agent) signInAgain(ctx context.Context, az authorizer, st *retryState, e *Error) (*Token, bool, error) {
	acct, err := az.session().signInAgain(ctx)
	if err != nil || acct == nil {
		return nil, false, e
	}
	next, err := az.token(ctx)
	if err != nil {
		return nil, false, err
	}
	st.via = acct
	return next, true, nil
}

// responseError returns the protocol error a resource's response carries:
// an error in its WWW-Authenticate challenge of the scheme (401, 403), or
// extension_required in a JSON body (Poppy 0.1 §3.3, HTTP 403). For a 403
// without one, the body is restored for the caller.
func (a *Agent) responseError(resp *http.Response, scheme string) *Error {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	if e := challengeError(scheme, resp.StatusCode, resp.Header); e != nil {
		return e
	}
	if resp.StatusCode != http.StatusForbidden || !httpbody.IsJSON(resp.Header.Get("Content-Type")) {
		return nil
	}
	const limit = 64 << 10
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil || len(body) == limit {
		// Not a whole error document: hand back what was read and the rest.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if e := parseErrorBody(resp.StatusCode, resp.Header, body); e != nil && e.Is(ErrExtensionRequired) {
		return e
	}
	return nil
}

// replayable returns a function that gives the request body afresh for
// every attempt, or nil when the request has no body. A body without
// GetBody is buffered up to MaxBody; a larger one is refused. It takes
// ownership of req.Body as a RoundTripper must.
func (a *Agent) replayable(req *http.Request) (func() (io.ReadCloser, error), error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody != nil {
		req.Body.Close()
		return req.GetBody, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(io.LimitReader(req.Body, a.maxBody+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > a.maxBody {
		return nil, errors.New("auth: request body larger than the replay limit; set GetBody")
	}
	return replayBody(b), nil
}

// BearerClient returns an HTTP client for one of the MCP servers of the
// domain the Session was started through (Site.BearerClient for another),
// identified by its url from poppy.json.
func (s *Session) BearerClient(resource string) (*http.Client, error) {
	return s.site().BearerClient(resource)
}

// BearerClient returns an HTTP client for one of this domain's MCP servers,
// identified by its url from the domain's poppy.json. Its transport sends a
// Bearer Session Token of the Session issued for that url only, and only to
// requests under it (same origin, path equal or below); any other request
// fails unsent. Poppy 0.1 §4.3: "each one works at only one MCP server."
func (w *Site) BearerClient(resource string) (*http.Client, error) {
	s := w.s
	if !slices.Contains(w.c.MCPServers, resource) {
		return nil, fmt.Errorf("auth: %q is not one of the Company's MCP servers", resource)
	}
	u, err := httpsURL("MCP server url", resource)
	if err != nil {
		return nil, err
	}
	t := &bearerTransport{s: s, resource: resource, origin: origin(u), path: strings.TrimSuffix(u.EscapedPath(), "/")}
	return s.newClient(t), nil
}

// bearerTransport is the Bearer transport for one MCP server.
type bearerTransport struct {
	s        *Session
	resource string
	origin   string
	path     string // without a trailing slash
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.covers(req.URL) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("auth: the Bearer token for %s is not sent to %s", t.resource, redactURL(req.URL))
	}
	return t.s.a.roundTrip(req, t)
}

// covers reports whether u is at the MCP server: same origin, and the same
// path or one below it.
func (t *bearerTransport) covers(u *url.URL) bool {
	if origin(u) != t.origin {
		return false
	}
	p := u.EscapedPath()
	return p == t.path || strings.HasPrefix(p, t.path+"/") || t.path == "" && p == "/"
}

// cell returns the token cell of the resource; a new Session in place of an
// ended one starts with an empty cell.
func (t *bearerTransport) cell() *tokenCell { return t.s.resourceCell(t.resource) }

// resourceCell returns the cell of the tokens kept under key in s.bearer,
// making it: the Session drops them all when it changes (a new Session, a
// sign-in), as they were issued for its earlier state.
func (s *Session) resourceCell(key string) *tokenCell {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.bearer[key]
	if !ok {
		c = &tokenCell{}
		s.bearer[key] = c
	}
	return c
}

func (t *bearerTransport) token(ctx context.Context) (*Token, error) {
	return t.cell().get(ctx, t.s.a, t.s.tokenEP, t.fetch)
}

func (t *bearerTransport) renewAfter(ctx context.Context, used *Token) (*Token, error) {
	return t.cell().renewAfter(ctx, t.s.a, t.s.tokenEP, used, t.fetch)
}

func (t *bearerTransport) scheme() string { return "Bearer" }

func (t *bearerTransport) session() *Session { return t.s }

func (t *bearerTransport) authorize(r *http.Request, tok *Token) error {
	// RFC 6750 §2.1: "Authorization: Bearer mF_9.B5f-4.1JqM"
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken.Reveal())
	r.Header.Del("DPoP")
	return nil
}

// fetch requests a Bearer token for the resource in the Session: the
// Session's renewal request with resource and without a DPoP header.
// Poppy 0.1 §4.3: "the Personal Agent sends the request that renews the
// Session's token ... without the DPoP header, and MUST include resource".
func (t *bearerTransport) fetch(ctx context.Context, _ *Token) (*Token, error) {
	return t.s.forResource(ctx, t.resource, nil)
}

// forResource asks for a token for resource in the Session, with proof
// (nil: a Bearer token): the JWT bearer grant for a signed-out Session, the
// refresh_token grant for a signed-in one (Poppy 0.1 §4.3: "the request that
// renews the Session's token (4.2, or 4.8 for a signed-in Session)").
func (s *Session) forResource(ctx context.Context, resource string, proof *ProofKey) (*Token, error) {
	sess, err := s.token(ctx)
	if err == nil && s.isStranded() {
		// Asking for it is renewing the Session (Poppy 0.1 §4.3), which a
		// stranded Session cannot be: it is replaced first.
		sess, err = s.renewAfter(ctx, sess)
	}
	if err != nil {
		return nil, err
	}
	tok, err := s.grant(ctx, sess.SessionID, resource, proof)
	if errors.Is(err, ErrInvalidSession) {
		// The Session ended: renew it (which starts a new one), then ask again.
		if sess, err = s.renewAfter(ctx, sess); err != nil {
			return nil, err
		}
		tok, err = s.grant(ctx, sess.SessionID, resource, proof)
	}
	return tok, err
}
