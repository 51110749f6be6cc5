// Package app assembles one running Personal Agent from the protocol
// packages: the state, the agent's identity, the network guard, the local
// pages, the MCP tools (package tools) and, in HTTP mode, the mux with its
// public mounts, liveness, readiness and graceful drain, and the hosted
// mode's protected resource (docs/architecture.md "app"). cmd/poppy-mcp
// parses its flags into an Options; serve, demo and the tests all call New.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// DefaultEvictIdle is Options.EvictIdle's default (serve --evict-idle).
const DefaultEvictIdle = tools.DefaultEvictIdle

// Options are what New assembles. The zero value serves over stdio, with
// the state in the default directory and every tool.
type Options struct {
	// State is where the state is kept. With Demo and no State.Dir, a
	// temporary directory that Close removes: the demo Company forgets
	// everything on exit, and so does the demo agent.
	State State
	// ClientID is the agent's client_id URL; "" loads the one
	// `poppy-mcp init` stored.
	ClientID string
	// Resolve maps HOST:PORT to an address past the network guard, as
	// --resolve does; nil maps none.
	Resolve func(hostport string) (string, bool)
	// PagesAddr is where the local pages listen, on loopback; "" is
	// 127.0.0.1 on a random port.
	PagesAddr string
	// Browser is the path of a headless Chromium (see BrowserPath), for
	// the browse_page tool; "" serves none.
	Browser string
	// ReadOnly and Toolsets choose the tools served (tools.Options); the
	// zero Toolsets serves every group.
	ReadOnly bool
	Toolsets tools.Toolsets
	// EvictIdle is how long a person of hosted mode may stay idle before
	// what is held in memory for them is forgotten (serve --evict-idle;
	// tools.Options.EvictIdle): zero is DefaultEvictIdle, negative never.
	EvictIdle time.Duration
	// Metrics records the metrics (see ServeMetrics); nil records none.
	Metrics *metrics.Recorder
	// HTTP is HTTP mode's options, checked (HTTPOptions.Check); nil over
	// stdio and in the scripted demo. Its token is resolved once the state
	// directory is known.
	HTTP *HTTPOptions
	// Demo is the embedded demo Company to serve with; nil serves none.
	Demo *Demo
	// Logger logs; nil logs nothing.
	Logger *slog.Logger
	// Stderr is where HTTP mode's bearer token is shown, once; nil is
	// io.Discard.
	Stderr io.Writer
	// Version is what MCP clients are told; "" is tools.Version.
	Version string
}

// Demo is an embedded Company an App serves with (serve --demo, demo): its
// names reach it past the network guard, and the agent's identity is the
// one it publishes.
type Demo struct {
	// Guard maps the demo Company's names to its listener and trusts its
	// CA, in place of the guard Options.Resolve makes.
	Guard *netguard.Options
	// ClientID is the demo agent's client_id, at the demo Company.
	ClientID string
	// CAPEM is the demo Company's CA, which the browser trusts.
	CAPEM []byte
	// Publish serves the agent's agent.json and jwks.json at ClientID.
	Publish func(agentJSON, jwks []byte)
}

// App is one running Personal Agent: the tools over the protocol packages.
// Serve it once, with ServeStdio or ServeHTTP, then Close it once; Tools
// and Store may be called from any goroutine meanwhile.
type App struct {
	opts     Options
	logger   *slog.Logger
	tools    *tools.Server
	store    *store.Store
	pages    *pages.Server
	identity *auth.Identity // nil without one
	// noIdentity says, when identity is nil, what is missing and what to run.
	noIdentity string
	hosted     *hosted // with HTTP.Auth.Issuer; else nil
	cleanup    []func()
}

// New starts an App: it opens the state, loads the identity, starts the
// local pages and, with Options.Browser, the browser. What does not start
// is an error, often a *StartError saying what to do; what did start is
// closed again.
func New(ctx context.Context, o Options) (*App, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Version == "" {
		o.Version = tools.Version
	}
	a := &App{opts: o, logger: o.Logger}
	if err := a.start(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Tools is the App's MCP server.
func (a *App) Tools() *tools.Server { return a.tools }

// Store is the App's state.
func (a *App) Store() *store.Store { return a.store }

// start brings a's parts up in order; New closes what did start when a
// later part cannot.
func (a *App) start(ctx context.Context) error {
	guard, err := a.guard()
	if err != nil {
		return err
	}
	// One base transport for every Company connection, through the network guard.
	base := netguard.New(guard).Transport()
	// Poppy 0.1 §4.3: a 429 on any endpoint holds it for every request.
	holds := &retryafter.Holds{}
	m := a.opts.Metrics
	// One HTTP cache for every public document; what reaches the network is counted.
	docs := discovery.New(DocumentClient(m.Transport(base, metrics.Fixed(metrics.EndpointDocument))), &discovery.Options{Holds: holds})
	if err := a.openState(ctx, docs, base); err != nil {
		return err
	}
	agent, err := a.newAgent(ctx, m.Transport(base, metrics.EndpointKind), holds)
	if err != nil {
		return err
	}
	opts := &tools.Options{
		Agent: agent, Store: a.store, Pages: a.pages, Logger: a.logger,
		PublicURL: a.publicURL(), NoIdentity: a.noIdentity, Metrics: m, Version: a.opts.Version,
		ReadOnly: a.opts.ReadOnly, Toolsets: a.opts.Toolsets, EvictIdle: a.opts.EvictIdle,
	}
	if a.opts.ReadOnly || a.opts.Toolsets.String() != "all" {
		a.logger.Info("serving some tools only", "read_only", a.opts.ReadOnly, "toolsets", a.opts.Toolsets.String())
	}
	if a.opts.Browser != "" {
		if opts.Browser, err = a.startBrowser(a.opts.Browser, guard); err != nil {
			return fmt.Errorf("--browser: %w", err)
		}
		a.cleanup = append(a.cleanup, func() { opts.Browser.Close() })
	}
	a.tools = tools.New(docs, opts)
	return nil
}

// guard is the network guard's options: the demo Company's, or those of
// Options.Resolve. With the demo and no state directory, it makes one.
func (a *App) guard() (*netguard.Options, error) {
	if a.opts.Demo == nil {
		return &netguard.Options{Resolve: a.opts.Resolve}, nil
	}
	if a.opts.State.Dir == "" { // the demo Company forgets everything on exit: so does the demo agent
		dir, err := os.MkdirTemp("", "poppy-mcp-demo-")
		if err != nil {
			return nil, err
		}
		a.opts.State.Dir = dir
		a.cleanup = append(a.cleanup, func() { os.RemoveAll(dir) })
	}
	return a.opts.Demo.Guard, nil
}

// openState opens the store, then what HTTP mode needs of it (the hosted
// mode's secret, or the bearer token kept in the state directory), then
// the local pages.
func (a *App) openState(ctx context.Context, docs *discovery.Client, base http.RoundTripper) (err error) {
	st := a.opts.State
	st.Metrics = a.opts.Metrics
	var dir string
	if a.store, dir, err = st.Open(ctx); err != nil {
		return StateError(dir, err)
	}
	h := a.opts.HTTP
	if h != nil && h.Auth.Issuer != "" {
		if a.hosted, err = newHosted(ctx, h, a.store, docs, base, a.logger); err != nil {
			return err
		}
		// Records logged with a person's context name them by the log ID
		// the deployment's secret keys (docs/architecture.md "People in logs").
		a.logger = slog.New(mcpauth.LogHandler(a.logger.Handler(), a.hosted.resource.LogIDs()))
	} else if h != nil {
		tokenDir, err := st.Directory()
		if err != nil {
			return err
		}
		if err := h.resolveToken(tokenDir, a.opts.Stderr); err != nil {
			return err
		}
	}
	a.pages, err = a.newPages()
	return err
}

// publicURL is HTTP mode's PublicURL, or "".
func (a *App) publicURL() string {
	if a.opts.HTTP == nil {
		return ""
	}
	return a.opts.HTTP.PublicURL
}

// newPages starts the local pages: on loopback, and with a public URL the
// user's pages under it, opened only by a browser that has shown the
// deployment's bearer token once or, in hosted mode, by the browser of the
// person each page is for, signed in with the issuer.
func (a *App) newPages() (*pages.Server, error) {
	// Kept in the store: every replica sharing it serves every page.
	opts := &pages.Options{Addr: a.opts.PagesAddr, Store: a.store, Logger: a.logger}
	if pu := a.publicURL(); pu != "" {
		opts.PublicURL = strings.TrimSuffix(pu, "/") + "/pages"
		switch {
		case a.hosted == nil:
			opts.Gate = pages.NewCredentialGate(a.opts.HTTP.Token) // a public URL requires the token
		case a.hosted.login != nil:
			opts.Gate = a.hosted.login
		} // hosted without a Login: no Gate, every public page answers 403
	}
	p, err := pages.New(opts)
	if err != nil && a.opts.PagesAddr != "" {
		return nil, ListenError("--pages-addr", a.opts.PagesAddr, err)
	}
	return p, err
}

// ServeStdio serves MCP over stdin and stdout until stdin ends or ctx is
// done; either is no error.
func (a *App) ServeStdio(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	a.logger.Info("serving MCP over stdio", "demo", a.opts.Demo != nil)
	err := a.tools.ServeStdio(ctx, stdin, stdout, log.New(stderr, "poppy-mcp: ", 0))
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Close stops the App: background work stops and saves its state first,
// then the pages, the store and the browser close.
func (a *App) Close() {
	if a.tools != nil {
		a.tools.Close()
	}
	if a.pages != nil {
		a.pages.Close()
	}
	if a.store != nil {
		a.store.Close()
	}
	for _, f := range a.cleanup {
		f()
	}
}

// DocumentClient is the client for public documents over base: cached
// (package cache); discovery bounds each fetch in time.
func DocumentClient(base http.RoundTripper) *http.Client {
	return &http.Client{Transport: cache.New(base, nil)}
}
