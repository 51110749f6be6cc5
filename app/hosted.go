package app

// This file is serve's hosted mode: with --auth-issuer, /mcp is an OAuth
// protected resource of an existing authorization server (package mcpauth)
// instead of one person's bearer token, each request is one person's, and
// the user's pages open only in that person's browser, signed in with the
// same issuer (--auth-client-id).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// HostedOptions are the hosted mode's: serve's --auth-* flags. The zero
// value is not hosted.
type HostedOptions struct {
	Issuer       string   // --auth-issuer: the authorization server's issuer URL
	Scopes       []string // --auth-scope: what every access token must carry
	ClientID     string   // --auth-client-id: poppy-mcp's client there; "" opens the user's pages for no one
	ClientSecret string   // POPPY_AUTH_CLIENT_SECRET: ClientID's secret
}

// check refuses hosted flags that cannot work together with the others.
func (h *HostedOptions) check(o *HTTPOptions) error {
	if h.Issuer == "" {
		if len(h.Scopes) > 0 || h.ClientID != "" {
			return errors.New("--auth-scope and --auth-client-id need --auth-issuer")
		}
		return nil
	}
	u, err := url.Parse(h.Issuer)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("--auth-issuer %q must be the authorization server's issuer, an https URL", h.Issuer)
	case o.PublicURL == "":
		return errors.New("--auth-issuer needs --public-url: the resource tokens are issued for is <public-url>/mcp")
	case o.Token != "" || o.NoToken:
		return errors.New("--auth-issuer replaces the bearer token: drop --http-token, POPPY_HTTP_TOKEN and --no-http-token")
	}
	return nil
}

// resourceURL is the resource identifier of /mcp under publicURL.
func resourceURL(publicURL string) string { return strings.TrimSuffix(publicURL, "/") + "/mcp" }

// hosted is the hosted mode's running part.
type hosted struct {
	resource *mcpauth.Resource
	login    *mcpauth.Login // nil without --auth-client-id: the user's pages open for no one
}

// newHosted builds the protected resource and the browser sign-in. The
// issuer's documents go through docs and the token endpoint through base:
// both behind the network guard (--resolve reaches an issuer on a private
// address).
func newHosted(ctx context.Context, o *HTTPOptions, st *store.Store, docs *discovery.Client, base http.RoundTripper, logger *slog.Logger) (*hosted, error) {
	secret, err := DeploymentSecret(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("the hosted mode's secret in the state: %w", err)
	}
	h := &hosted{}
	h.resource, err = mcpauth.New(o.Auth.Issuer, resourceURL(o.PublicURL),
		&mcpauth.Options{Scopes: o.Auth.Scopes, Documents: docs, Secret: secret, Logger: logger})
	if err != nil {
		return nil, err
	}
	if o.Auth.ClientID != "" {
		h.login, err = h.resource.NewLogin(o.PublicURL, &mcpauth.LoginOptions{ClientID: o.Auth.ClientID, ClientSecret: o.Auth.ClientSecret,
			HTTPClient: &http.Client{Transport: base, Timeout: 30 * time.Second}})
		if err != nil {
			return nil, err
		}
	} else {
		logger.Warn("without --auth-client-id, the pages people open in a browser (mediated and direct sign-in) are refused: " +
			"register poppy-mcp as a client of " + o.Auth.Issuer + " with the redirect URI " + strings.TrimSuffix(o.PublicURL, "/") + mcpauth.CallbackPath)
	}
	go func() { // a wrong or unreachable issuer is said at start, without holding it up
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := h.resource.Discover(dctx); err != nil && ctx.Err() == nil {
			logger.Error("the authorization server cannot be used yet: tokens are answered 503 until it can", "issuer", o.Auth.Issuer, "err", err)
		}
	}()
	return h, nil
}

// mount serves /mcp (protected: mcp is already behind Require), its
// metadata at the RFC 9728 well-known paths, and the browser sign-in's
// callback (under --public-url's path prefix, for its host only).
func (h *hosted) mount(mux *http.ServeMux, mcp http.Handler, prefix string, p *pages.Server) {
	mux.Handle("/mcp", mcp)
	if prefix != "" {
		mux.Handle(prefix+"/mcp", mcp) // the resource's own path, behind a proxy that passes it through
	}
	for _, path := range h.resource.MetadataPaths() {
		mux.Handle(path, h.resource.MetadataHandler())
	}
	if h.login != nil {
		mux.Handle("GET "+prefix+mcpauth.CallbackPath, p.CheckHost(h.login.CallbackHandler()))
	}
}
