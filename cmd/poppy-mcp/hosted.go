package main

// This file is serve's hosted mode: with --auth-issuer, /mcp is an OAuth
// protected resource of an existing authorization server (package mcpauth)
// instead of one person's bearer token, each request is one person's, and
// the user's pages open only in that person's browser, signed in with the
// same issuer (--auth-client-id).

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// authClientSecretEnv holds --auth-client-id's secret: never a flag, which
// ps would show.
const authClientSecretEnv = "POPPY_AUTH_CLIENT_SECRET"

// authSecretName is the stored secret that binds MCP sessions to people and
// seals their browsers' cookies: shared by every process (and replica) of
// the state, so a restart signs no browser out.
const authSecretName = "mcpauth/secret"

// hostedOptions are serve's --auth-* flags.
type hostedOptions struct {
	issuer       string   // --auth-issuer
	scopes       listFlag // --auth-scope
	clientID     string   // --auth-client-id
	clientSecret string   // POPPY_AUTH_CLIENT_SECRET
}

// check refuses hosted flags that cannot work together with the others.
func (h *hostedOptions) check(o *httpOptions) error {
	if h.issuer == "" {
		if len(h.scopes) > 0 || h.clientID != "" {
			return errors.New("--auth-scope and --auth-client-id need --auth-issuer")
		}
		return nil
	}
	u, err := url.Parse(h.issuer)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("--auth-issuer %q must be the authorization server's issuer, an https URL", h.issuer)
	case o.publicURL == "":
		return errors.New("--auth-issuer needs --public-url: the resource tokens are issued for is <public-url>/mcp")
	case o.token != "" || o.noToken:
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
func newHosted(ctx context.Context, o *httpOptions, st *store.Store, docs *discovery.Client, base http.RoundTripper, logger *slog.Logger) (*hosted, error) {
	secret, err := deploymentSecret(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("the hosted mode's secret in the state: %w", err)
	}
	h := &hosted{}
	h.resource, err = mcpauth.New(o.auth.issuer, resourceURL(o.publicURL),
		&mcpauth.Options{Scopes: o.auth.scopes, Documents: docs, Secret: secret, Logger: logger})
	if err != nil {
		return nil, err
	}
	if o.auth.clientID != "" {
		h.login, err = h.resource.NewLogin(o.publicURL, &mcpauth.LoginOptions{ClientID: o.auth.clientID, ClientSecret: o.auth.clientSecret,
			HTTPClient: &http.Client{Transport: base, Timeout: 30 * time.Second}})
		if err != nil {
			return nil, err
		}
	} else {
		logger.Warn("without --auth-client-id, the pages people open in a browser (mediated and direct sign-in) are refused: " +
			"register poppy-mcp as a client of " + o.auth.issuer + " with the redirect URI " + strings.TrimSuffix(o.publicURL, "/") + mcpauth.CallbackPath)
	}
	go func() { // a wrong or unreachable issuer is said at start, without holding it up
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := h.resource.Discover(dctx); err != nil && ctx.Err() == nil {
			logger.Error("the authorization server cannot be used yet: tokens are answered 503 until it can", "issuer", o.auth.issuer, "err", err)
		}
	}()
	return h, nil
}

// deploymentSecret is the stored hosted-mode secret, made on the first start.
// Replicas starting at once agree on one: the first to hold the lease makes
// it, the others read it.
func deploymentSecret(ctx context.Context, st *store.Store) ([]byte, error) {
	holder := randomHolder()
	for range 50 {
		b, err := st.Secret(ctx, authSecretName)
		if err == nil && len(b) >= 32 {
			return b, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		lease, err := st.AcquireLease(ctx, authSecretName, holder, 30*time.Second)
		if errors.Is(err, store.ErrLeaseHeld) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return makeSecret(ctx, st, lease)
	}
	return nil, errors.New("another process held the lease on it for too long")
}

// makeSecret makes and stores the secret under lease, unless another
// process did first.
func makeSecret(ctx context.Context, st *store.Store, lease store.Lease) ([]byte, error) {
	defer st.ReleaseLease(context.WithoutCancel(ctx), lease)
	if b, err := st.Secret(ctx, authSecretName); err == nil && len(b) >= 32 {
		return b, nil
	}
	b := make([]byte, 32)
	rand.Read(b)
	return b, st.PutSecret(ctx, authSecretName, b)
}

func randomHolder() string {
	b := make([]byte, 12)
	rand.Read(b)
	return fmt.Sprintf("serve-%d-%x", os.Getpid(), b)
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
