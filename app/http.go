package app

// This file is HTTP mode: MCP over streamable HTTP at /mcp, behind the
// drain's gate, the Origin check and the bearer token (or, in hosted mode,
// the authorization server's access tokens), and with a public URL the
// agent's own documents and the user's pages.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/tools"
	"io"
)

// HTTPOptions are HTTP mode's: serve's --http flags. Messages about them
// name those flags.
type HTTPOptions struct {
	Addr         string   // --http: HOST:PORT, or a bare port on 127.0.0.1
	Token        string   // --http-token or POPPY_HTTP_TOKEN; "" is the one kept in the state directory
	NoToken      bool     // --no-http-token
	PublicURL    string   // --public-url; "" serves no public documents nor pages
	AllowOrigins []string // --allow-origin, each scheme://host[:port]
	Auth         HostedOptions

	// DrainTimeout is --drain-timeout; zero is DefaultDrainTimeout.
	DrainTimeout time.Duration

	// URL is the MCP endpoint's URL, once listening, for the messages that
	// show the bearer token.
	URL string

	tokenFile string // where the token came from, when resolveToken read or made it
	// terminal reports whether stderr is a terminal; nil asks the OS.
	// Tests set it.
	terminal func(io.Writer) bool
}

// Check refuses a configuration that would expose MCP without a token, and
// normalises Addr and AllowOrigins.
func (o *HTTPOptions) Check() error {
	if _, err := strconv.ParseUint(o.Addr, 10, 16); err == nil {
		o.Addr = "127.0.0.1:" + o.Addr // a bare port binds loopback: the safe default
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT, like 127.0.0.1:8808", o.Addr)
	}
	if err := o.Auth.check(o); err != nil {
		return err
	}
	if err := o.checkToken(); err != nil {
		return err
	}
	if o.PublicURL != "" {
		u, err := url.Parse(o.PublicURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--public-url %q must be an https URL", o.PublicURL)
		}
	}
	for i, raw := range o.AllowOrigins {
		origin, err := parseOrigin(raw)
		if err != nil {
			return err
		}
		o.AllowOrigins[i] = origin
	}
	return nil
}

// checkToken refuses to go without a token where one is needed: everywhere
// but on loopback, unless the authorization server's tokens replace it.
func (o *HTTPOptions) checkToken() error {
	switch {
	case o.Auth.Issuer != "":
		return nil
	case o.NoToken && o.Token != "":
		return errors.New("--no-http-token with a token (--http-token or POPPY_HTTP_TOKEN): choose one")
	case o.NoToken && !pages.IsLoopback(o.Addr):
		return fmt.Errorf("refusing --no-http-token on %s: off loopback MCP needs a bearer token (--http-token or POPPY_HTTP_TOKEN)", o.Addr)
	case o.NoToken && o.PublicURL != "":
		return errors.New("refusing --no-http-token with --public-url: a server meant to be reached from elsewhere needs a bearer token")
	case !pages.IsLoopback(o.Addr) && o.Token == "":
		return fmt.Errorf("refusing to serve MCP on %s without a bearer token: set --http-token or POPPY_HTTP_TOKEN (or bind 127.0.0.1)", o.Addr)
	case o.PublicURL != "" && o.Token == "":
		// Behind --public-url the server is meant to be reached from elsewhere
		// (a reverse proxy), and mcp-go's localhost Host check is off: only the
		// token keeps anyone else, or a DNS-rebinding page, away from /mcp.
		return errors.New("refusing to serve MCP behind --public-url without a bearer token: set --http-token or POPPY_HTTP_TOKEN")
	}
	return nil
}

// parseOrigin checks an --allow-origin value and returns it as a browser
// sends it in Origin: scheme://host[:port], lowercased.
func parseOrigin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--allow-origin %q: want an origin, scheme://host[:port], like https://app.example", raw)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// ServeHTTP serves MCP over streamable HTTP at /mcp on ln, with the
// options New was given in Options.HTTP, until ctx ends, then drains
// (ops.go): new MCP requests get 503, the tool calls in flight have
// DrainTimeout to finish, then every request still open is ended.
func (a *App) ServeHTTP(ctx context.Context, ln net.Listener) error {
	o, logger := *a.opts.HTTP, a.logger
	// Requests run under base, not under ctx: a signal must not cut the
	// calls in flight short, only the drain's bound does.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	g := &gate{}
	srv := &http.Server{Handler: a.httpMux(ln.Addr(), g), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	logger.Info("serving MCP over streamable HTTP", "url", o.URL, "token", tokenSource(o), "health", HealthPath, "ready", ReadyPath)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	bound := o.DrainTimeout
	if bound <= 0 {
		bound = DefaultDrainTimeout
	}
	if err := drainHTTP(srv, g, a.tools, cancelBase, bound, logger); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("drained: stopping background work, then closing the store")
	return nil
}

// tokenSource says, for the log, where the bearer token came from; never
// the token.
func tokenSource(o HTTPOptions) string {
	switch {
	case o.Auth.Issuer != "":
		return "access tokens of " + o.Auth.Issuer
	case o.NoToken:
		return "none (--no-http-token)"
	case o.tokenFile != "":
		return o.tokenFile
	}
	return "--http-token or POPPY_HTTP_TOKEN"
}

// httpMux routes /mcp (behind the drain's gate, the Origin check, and the
// bearer token or, in hosted mode, the authorization server's access
// tokens), the liveness and readiness endpoints and, with --public-url, the agent's own
// documents and local pages. Every request gets an ID (ops.go).
func (a *App) httpMux(bound net.Addr, g *gate) http.Handler {
	o := *a.opts.HTTP
	mux := http.NewServeMux()
	public := o.PublicURL != "" || !pages.IsLoopback(o.Addr)
	mcp, origins := a.tools.HTTPHandler(public), allowedOrigins(o, bound)
	if a.hosted != nil {
		a.hosted.mount(mux, g.guard(checkOrigin(origins, a.hosted.resource.Require(mcp))), publicPrefix(o.PublicURL), a.pages)
	} else {
		mux.Handle("/mcp", g.guard(checkOrigin(origins, requireToken(o.Token, mcp))))
	}
	mux.Handle("GET "+HealthPath, healthHandler())
	mux.Handle("GET "+ReadyPath, readyHandler(a.readyChecks(), g, a.logger))
	if o.PublicURL != "" {
		a.mountPublic(mux, o.PublicURL)
	}
	return withRequestID(mux)
}

// allowedOrigins are the origins whose pages may call /mcp: the server's
// own (as bound; on loopback also under localhost, 127.0.0.1 and [::1]),
// --public-url's and those of --allow-origin.
func allowedOrigins(o HTTPOptions, bound net.Addr) map[string]bool {
	allowed := map[string]bool{"http://" + strings.ToLower(bound.String()): true}
	if _, port, err := net.SplitHostPort(bound.String()); err == nil && pages.IsLoopback(bound.String()) {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			allowed["http://"+h+":"+port] = true
		}
	}
	if o.PublicURL != "" {
		if u, err := url.Parse(o.PublicURL); err == nil {
			allowed[strings.ToLower(u.Scheme+"://"+u.Host)] = true
		}
	}
	for _, origin := range o.AllowOrigins {
		allowed[origin] = true
	}
	return allowed
}

// checkOrigin refuses a request whose Origin is present and not allowed.
// MCP's streamable HTTP transport: servers "MUST validate the Origin header
// on all incoming connections to prevent DNS rebinding attacks", and answer
// 403 when it is present and invalid. Clients that are not browsers send
// no Origin.
func checkOrigin(allowed map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[strings.ToLower(origin)] {
			http.Error(w, "forbidden: requests from "+origin+" are not allowed here (poppy-mcp --allow-origin)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken checks Authorization: Bearer TOKEN in constant time.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="poppy-mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// publicPrefix is --public-url's path, without a trailing slash.
func publicPrefix(publicURL string) string {
	if pu, err := url.Parse(publicURL); err == nil {
		return strings.TrimSuffix(pu.Path, "/")
	}
	return ""
}

// mountPublic serves agent.json and jwks.json at the paths their URLs name
// when those URLs are under publicURL, the user's pages under /pages/
// (behind the deployment's credential) and the Direct Sign-In callback.
// Pages and callback answer only for publicURL's host.
func (a *App) mountPublic(mux *http.ServeMux, publicURL string) {
	prefix := publicPrefix(publicURL)
	mux.Handle(prefix+"/pages/", a.pages.Handler())
	// Direct Sign-In returns here (Poppy 0.1 §4.5); it must be in redirect_uris.
	callback := strings.TrimSuffix(publicURL, "/") + tools.CallbackPath
	mux.Handle("GET "+prefix+tools.CallbackPath, a.pages.CheckHost(a.tools.CallbackHandler()))
	if a.identity == nil {
		return
	}
	md := a.identity.Metadata()
	if !slices.Contains(md.RedirectURIs, callback) {
		a.logger.Warn("Direct Sign-In needs the callback in agent.json's redirect_uris: run `poppy-mcp init --client-id ... --redirect-uri " + callback + "` and publish agent.json again")
	}
	docs := map[string]func() ([]byte, error){md.ClientID: a.identity.AgentJSON, md.JWKSURI: a.identity.JWKSJSON}
	base := strings.TrimSuffix(publicURL, "/")
	for u, body := range docs {
		if !strings.HasPrefix(u, base+"/") {
			a.logger.Warn("not serving an identity document outside --public-url", "url", u)
			continue
		}
		path := u[len(base):]
		if pu, err := url.Parse(base); err == nil {
			path = strings.TrimSuffix(pu.Path, "/") + path
		}
		mux.Handle("GET "+path, identityDocument(body))
	}
}

// identityDocument serves one of the agent's documents, as body makes it.
func identityDocument(body func() ([]byte, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := body()
		if err != nil {
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(b)
	})
}
