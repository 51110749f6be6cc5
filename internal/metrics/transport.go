package metrics

// This file counts the requests poppy-mcp makes to Companies, by the kind
// of endpoint they go to, told from the request itself: a Company names
// its endpoints' URLs (Poppy 0.1 §3), so a URL is no bounded label.

import (
	"net/http"
	"strings"
)

// The endpoint label of a Company request.
const (
	EndpointDocument = "document" // a public document: poppy.json, an OpenAPI document, an issuer's metadata or keys
	EndpointOAuth    = "oauth"    // a form POST: token, device authorization, revocation, mediated sign-in
	EndpointMCP      = "mcp"      // a Company MCP server (streamable HTTP)
	EndpointEvents   = "events"   // an event stream (SSE)
	EndpointResource = "resource" // a request with an access token: conversations, API operations
	EndpointOther    = "other"
)

// Kind tells a request's endpoint kind.
type Kind func(*http.Request) string

// Fixed is a Kind that is always kind: for a transport only one kind of
// request goes through (public documents).
func Fixed(kind string) Kind { return func(*http.Request) string { return kind } }

// EndpointKind tells a Company request's kind from its method and headers.
func EndpointKind(req *http.Request) string {
	h := req.Header
	switch {
	case h.Get("Mcp-Protocol-Version") != "" || h.Get("Mcp-Session-Id") != "":
		return EndpointMCP
	case strings.Contains(h.Get("Accept"), "text/event-stream") && req.Method == http.MethodGet:
		return EndpointEvents
	case req.Method == http.MethodPost && strings.HasPrefix(h.Get("Content-Type"), "application/x-www-form-urlencoded"):
		return EndpointOAuth // RFC 6749 §4.1.3, RFC 8628 §3.1, RFC 7009 §2.1 all post forms
	case h.Get("Authorization") != "":
		return EndpointResource
	case req.Method == http.MethodGet:
		return EndpointDocument
	}
	return EndpointOther
}

// Transport counts every request through base by kind(req) and its
// response's status class ("error" when there is no response). On a nil
// Recorder it is base.
func (r *Recorder) Transport(base http.RoundTripper, kind Kind) http.RoundTripper {
	if r == nil {
		return base
	}
	return &transport{base: base, kind: kind, r: r}
}

type transport struct {
	base http.RoundTripper
	kind Kind
	r    *Recorder
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := t.kind(req) // before base: it may change the request's headers
	resp, err := t.base.RoundTrip(req)
	status := "error"
	if err == nil {
		status = statusClass(resp.StatusCode)
	}
	t.r.companyRequests.WithLabelValues(kind, status).Inc()
	return resp, err
}
