package mcpauth

// This file implements OAuth 2.0 Protected Resource Metadata (RFC 9728) for
// /mcp: the document that tells an MCP client which authorization server
// issues tokens for it, served at the well-known URL made from the
// resource identifier and, for clients that look only there, at the root.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// wellKnown is the well-known URI suffix of RFC 9728 §3.
const wellKnown = "/.well-known/oauth-protected-resource"

// Metadata is the protected resource metadata document.
func (r *Resource) Metadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		// RFC 9728 §2: resource, "the protected resource's resource identifier".
		Resource: r.resource,
		// The MCP authorization specification: "MUST include the
		// authorization_servers field containing at least one authorization server".
		AuthorizationServers: []string{r.issuer},
		// RFC 6750 §2.1 only: tokens in a query or a form body are refused.
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        r.scopes,
		ResourceName:           "poppy-mcp",
	}
}

// MetadataURL is where the metadata is: RFC 9728 §3.1, the well-known
// suffix inserted between the resource identifier's host and its path
// (https://agent.example/mcp: https://agent.example/.well-known/oauth-protected-resource/mcp).
// It is the URL the challenge's resource_metadata names.
func (r *Resource) MetadataURL() string {
	u, _ := url.Parse(r.resource) // New checked it
	return u.Scheme + "://" + u.Host + r.MetadataPaths()[0]
}

// MetadataPaths are the paths MetadataHandler must be mounted at on the
// resource's host: the well-known URL of RFC 9728 §3.1, and the root
// well-known URL, which MCP clients try when the first is missing.
func (r *Resource) MetadataPaths() []string {
	u, _ := url.Parse(r.resource)
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{wellKnown}
	}
	return []string{wellKnown + path, wellKnown}
}

// MetadataHandler serves the metadata as application/json (RFC 9728 §3.2),
// to any origin: it is public, and browser-based clients read it too.
func (r *Resource) MetadataHandler() http.Handler {
	body, _ := json.Marshal(r.Metadata())
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		switch req.Method {
		case http.MethodOptions:
			w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "MCP-Protocol-Version")
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet, http.MethodHead:
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Write(body)
	})
}

// Discover fetches the issuer's metadata and keys now, so that a
// deployment learns at start that its --auth-issuer is wrong or out of
// reach, rather than at the first request.
func (r *Resource) Discover(ctx context.Context) error {
	_, err := r.keys.metadata(ctx)
	return err
}
