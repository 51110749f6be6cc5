// This file implements the Bearer variant of the Session transport, for the
// Company's MCP servers (Poppy 0.1 §4.3 "Bearer tokens", §6; RFC 6750 §2.1;
// RFC 8707 resource indicators).

package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// BearerClient returns an HTTP client for one of the Company's MCP servers,
// identified by its url from poppy.json. Its transport sends a Bearer
// Session Token issued for that url only, and only to requests under it
// (same origin, path equal or below); any other request fails unsent.
// Poppy 0.1 §4.3: "each one works at only one MCP server."
func (s *Session) BearerClient(resource string) (*http.Client, error) {
	if !slices.Contains(s.company.MCPServers, resource) {
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
func (t *bearerTransport) cell() *tokenCell {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	c, ok := t.s.bearer[t.resource]
	if !ok {
		c = &tokenCell{}
		t.s.bearer[t.resource] = c
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
	sess, err := t.s.token(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := t.request(ctx, sess.SessionID)
	if errors.Is(err, ErrInvalidSession) {
		// The Session ended: renew it (which starts a new one), then ask again.
		if sess, err = t.s.renewAfter(ctx, sess); err != nil {
			return nil, err
		}
		tok, err = t.request(ctx, sess.SessionID)
	}
	return tok, err
}

func (t *bearerTransport) request(ctx context.Context, sessionID string) (*Token, error) {
	return t.s.a.postToken(ctx, tokenRequest{
		endpoint: t.s.company.TokenEndpoint,
		form:     t.s.grantForm(sessionID, t.resource),
	})
}
