// This file implements DPoP Session Tokens for one resource (Poppy 0.1 §4.3
// "Narrower tokens", RFC 8707): a Company that wants separate tokens for a
// service gives its poppy.json entry a resource, and accepts there only
// tokens issued for it.

package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// ResourceClient returns an HTTP client for a Company API whose poppy.json
// entry has a resource. Like Client, its transport sends a DPoP Session
// Token with a fresh proof, renews and retries; but the token is one issued
// for resource, requested for the Session with resource set and a proof.
// It follows redirects only within the same origin.
// Poppy 0.1 §4.3: a Company "accepts a token at such a service only if it
// was issued for that resource".
func (s *Session) ResourceClient(resource string) (*http.Client, error) {
	// RFC 8707 §2: "The value of the resource parameter MUST be an absolute URI ... MUST NOT include a fragment component."
	u, err := url.Parse(resource)
	if err != nil || !u.IsAbs() || u.Fragment != "" || u.RawFragment != "" {
		return nil, fmt.Errorf("auth: resource %q is not an absolute URI without a fragment", resource)
	}
	return s.newClient(&resourceTransport{s: s, resource: resource}), nil
}

// resourceTransport is the DPoP transport of one resource's tokens.
type resourceTransport struct {
	s        *Session
	resource string
}

func (t *resourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.s.a.roundTrip(req, t)
}

// cell returns the resource's token cell, kept beside the Bearer tokens
// under "DPoP " and the resource (no MCP url starts so), so the Session
// drops it when it changes, as it does them.
func (t *resourceTransport) cell() *tokenCell { return t.s.resourceCell("DPoP " + t.resource) }

func (t *resourceTransport) token(ctx context.Context) (*Token, error) {
	return t.cell().get(ctx, t.s.a, t.s.tokenEP, t.fetch)
}

func (t *resourceTransport) renewAfter(ctx context.Context, used *Token) (*Token, error) {
	return t.cell().renewAfter(ctx, t.s.a, t.s.tokenEP, used, t.fetch)
}

func (t *resourceTransport) scheme() string { return "DPoP" }

func (t *resourceTransport) session() *Session { return t.s }

// authorize is the Session transport's: the same proof key signs for every
// token of the Session.
func (t *resourceTransport) authorize(r *http.Request, tok *Token) error {
	return (&sessionTransport{s: t.s}).authorize(r, tok)
}

// fetch requests a token for the resource in the Session: the Session's
// renewal request with resource, and with a DPoP proof.
// Poppy 0.1 §4.3: "Any token request MAY include ... resource (RFC 8707), to ask for a token for one service."
func (t *resourceTransport) fetch(ctx context.Context, _ *Token) (*Token, error) {
	return t.s.forResource(ctx, t.resource, t.s.proof)
}
