package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/tools"
)

// httpOptions are serve's HTTP-mode flags.
type httpOptions struct {
	addr      string // --http
	token     string // --http-token or POPPY_HTTP_TOKEN
	publicURL string // --public-url
}

// isLoopback reports whether addr binds only to the loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHTTP refuses a configuration that would expose MCP without a token.
func (o *httpOptions) check() error {
	if _, err := strconv.ParseUint(o.addr, 10, 16); err == nil {
		o.addr = "127.0.0.1:" + o.addr // a bare port binds loopback: the safe default
	}
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT, like 127.0.0.1:8808", o.addr)
	}
	if !isLoopback(o.addr) && o.token == "" {
		return fmt.Errorf("refusing to serve MCP on %s without a bearer token: set --http-token or POPPY_HTTP_TOKEN (or bind 127.0.0.1)", o.addr)
	}
	if o.publicURL != "" && o.token == "" {
		// Behind --public-url the server is meant to be reached from elsewhere
		// (a reverse proxy), and mcp-go's localhost Host check is off: only the
		// token keeps anyone else, or a DNS-rebinding page, away from /mcp.
		return errors.New("refusing to serve MCP behind --public-url without a bearer token: set --http-token or POPPY_HTTP_TOKEN")
	}
	if o.publicURL != "" {
		u, err := url.Parse(o.publicURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--public-url %q must be an https URL", o.publicURL)
		}
	}
	return nil
}

// serveHTTP serves MCP over streamable HTTP at /mcp until ctx ends, then
// shuts down gracefully.
func serveHTTP(ctx context.Context, a *app, o httpOptions, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.httpMux(o, logger), ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "token", o.token != "")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// httpMux routes /mcp (behind the bearer token when one is set) and, with
// --public-url, the agent's own documents and local pages.
func (a *app) httpMux(o httpOptions, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	public := o.publicURL != "" || !isLoopback(o.addr)
	mux.Handle("/mcp", requireToken(o.token, a.tools.HTTPHandler(public)))
	if o.publicURL != "" {
		a.mountPublic(mux, o.publicURL, logger)
	}
	return mux
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

// mountPublic serves agent.json and jwks.json at the paths their URLs name
// when those URLs are under --public-url, and the local pages under /pages/.
func (a *app) mountPublic(mux *http.ServeMux, publicURL string, logger *slog.Logger) {
	if a.pages != nil {
		mux.Handle("/pages/", a.pages.Handler())
	}
	// Direct Sign-In returns here (Poppy 0.1 §4.5); it must be in redirect_uris.
	callback := strings.TrimSuffix(publicURL, "/") + tools.CallbackPath
	if pu, err := url.Parse(callback); err == nil {
		mux.Handle("GET "+pu.Path, a.tools.CallbackHandler())
	}
	if a.identity != nil && !slices.Contains(a.identity.Metadata().RedirectURIs, callback) {
		logger.Warn("Direct Sign-In needs the callback in agent.json's redirect_uris: run `poppy-mcp init --client-id ... --redirect-uri " + callback + "` and publish agent.json again")
	}
	if a.identity == nil {
		return
	}
	md := a.identity.Metadata()
	docs := map[string]func() ([]byte, error){md.ClientID: a.identity.AgentJSON, md.JWKSURI: a.identity.JWKSJSON}
	base := strings.TrimSuffix(publicURL, "/")
	for u, body := range docs {
		if !strings.HasPrefix(u, base+"/") {
			logger.Warn("not serving an identity document outside --public-url", "url", u)
			continue
		}
		path := u[len(base):]
		if pu, err := url.Parse(base); err == nil {
			path = strings.TrimSuffix(pu.Path, "/") + path
		}
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
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
}
