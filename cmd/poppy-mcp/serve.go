package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// serveConfig is serve's parsed command line.
type serveConfig struct {
	common
	demo bool
	http httpOptions
	// warnings are flags given that this mode ignores, to log at start.
	warnings []string
}

// parseServe parses serve's flags and checks them, without starting
// anything; the assistant configs in examples/ are tested against it.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := &serveConfig{}
	cfg.register(fs)
	fs.BoolVar(&cfg.demo, "demo", false, "serve with the embedded demo Company at "+demoDomain)
	fs.StringVar(&cfg.pagesAddr, "pages-addr", "", "where local pages listen, on loopback (default 127.0.0.1 on a random port)")
	fs.StringVar(&cfg.http.addr, "http", "", "serve MCP over streamable HTTP at ADDR (endpoint /mcp) instead of stdio")
	fs.StringVar(&cfg.http.token, "http-token", os.Getenv("POPPY_HTTP_TOKEN"), "bearer token HTTP clients must send (or POPPY_HTTP_TOKEN; default: one kept in the state directory)")
	fs.BoolVar(&cfg.http.noToken, "no-http-token", false, "HTTP mode on loopback: serve MCP without a bearer token, to every local process")
	fs.Var(&cfg.http.allowOrigins, "allow-origin", "HTTP mode: an origin (scheme://host[:port]) whose web pages may call /mcp (repeatable)")
	fs.StringVar(&cfg.browser, "browser", "", "drive this headless Chromium (\"auto\" finds one) and add the browse_page tool")
	fs.StringVar(&cfg.http.publicURL, "public-url", "", "HTTP mode: the https URL this server is reachable at; serves agent.json, jwks.json and local pages there")
	if !parse(fs, args, stderr) {
		return nil, errors.New("usage: poppy-mcp serve [--demo] [--http ADDR [--http-token T | --no-http-token] [--public-url URL] [--allow-origin O]...] [flags]")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if _, err := cfg.logger(io.Discard); err != nil {
		return nil, err
	}
	if cfg.pagesAddr != "" && !pages.IsLoopback(cfg.pagesAddr) {
		return nil, fmt.Errorf("--pages-addr %q: local pages listen on loopback only (127.0.0.1:PORT); the user's pages go under --public-url", cfg.pagesAddr)
	}
	if cfg.http.addr == "" {
		return cfg, cfg.stdioOnly(fs)
	}
	if err := cfg.http.check(); err != nil {
		return nil, err
	}
	cfg.publicURL = cfg.http.publicURL
	return cfg, nil
}

// stdioOnly refuses HTTP-only flags that cannot work over stdio, and notes
// those stdio ignores.
func (cfg *serveConfig) stdioOnly(fs *flag.FlagSet) error {
	if cfg.http.publicURL != "" {
		return errors.New("--public-url needs --http: only HTTP mode serves the pages and documents under it")
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "http-token", "no-http-token", "allow-origin":
			cfg.warnings = append(cfg.warnings, "--"+f.Name+" applies to HTTP mode (--http) only: ignored over stdio")
		}
	})
	return nil
}

// runServe serves MCP over stdio, or over streamable HTTP with --http. Logs
// go to stderr only: in stdio mode stdout carries MCP. What stops it from
// starting is said in one line on stderr, with exit code 1.
func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseServe(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp:", err)
		return 2
	}
	logger, _ := cfg.logger(stderr)
	for _, w := range cfg.warnings {
		logger.Warn(w)
	}
	var ln net.Listener
	if cfg.http.addr != "" {
		// Listen first: a busy port is said before anything else starts.
		if ln, err = net.Listen("tcp", cfg.http.addr); err != nil {
			return startupFailure(stderr, listenError("--http", cfg.http.addr, err))
		}
		defer ln.Close()
		cfg.http.url = "http://" + ln.Addr().String() + "/mcp"
	}
	o := &appOptions{stderr: stderr, logger: logger}
	if ln != nil {
		o.http = &cfg.http
	}
	a, err := newApp(ctx, &cfg.common, cfg.demo, o)
	if err != nil {
		return startupFailure(stderr, err)
	}
	defer a.close()
	if ln != nil {
		err = serveHTTP(ctx, a, ln, cfg.http, logger)
	} else {
		err = serveStdio(ctx, a, stdin, stdout, stderr, logger)
	}
	if err != nil {
		logger.Error("serve", "err", err)
		return 1
	}
	return 0
}

func serveStdio(ctx context.Context, a *app, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	logger.Info("serving MCP over stdio", "demo", a.demo != nil)
	err := a.tools.ServeStdio(ctx, stdin, stdout, log.New(stderr, "poppy-mcp: ", 0))
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// app is one running Personal Agent: the tools over the protocol packages,
// and the embedded demo Company when asked for.
type app struct {
	tools    *tools.Server
	demo     *demoCompany
	store    *store.Store
	pages    *pages.Server
	identity *auth.Identity // nil without one
	cleanup  []func()
}

// appOptions are what newApp needs beyond the shared flags.
type appOptions struct {
	// http is HTTP mode's flags; nil over stdio and in the scripted demo.
	// Its token is resolved once the state directory is known.
	http   *httpOptions
	stderr io.Writer // where the token is shown, once
	logger *slog.Logger
}

func newApp(ctx context.Context, c *common, demo bool, o *appOptions) (*app, error) {
	a := &app{}
	if err := a.start(ctx, c, demo, o); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// start brings a's parts up in order; newApp closes what did start when a
// later part cannot.
func (a *app) start(ctx context.Context, c *common, demo bool, o *appOptions) (err error) {
	logger := o.logger
	guard := c.guardOptions()
	if demo {
		if a.demo, err = startDemoCompany(logger); err != nil {
			return err
		}
		guard = a.demo.guardOptions()
		if c.stateDir == "" { // the demo Company forgets everything on exit: so does the demo agent
			dir, err := os.MkdirTemp("", "poppy-mcp-demo-")
			if err != nil {
				return err
			}
			c.stateDir = dir
			a.cleanup = append(a.cleanup, func() { os.RemoveAll(dir) })
		}
	}
	// One base transport for every Company connection, through the network guard.
	base := netguard.New(guard).Transport()
	var dir string
	if a.store, dir, err = c.openStore(ctx); err != nil {
		return stateError(dir, err)
	}
	if o.http != nil {
		if err := o.http.resolveToken(a.store.Dir(), o.stderr); err != nil {
			return err
		}
	}
	if a.pages, err = newPages(c, o.http); err != nil {
		return err
	}
	holds := &retryafter.Holds{} // Poppy 0.1 §4.3: a 429 on any endpoint holds it for every request
	agent, err := a.newAgent(ctx, c, base, holds, logger)
	if err != nil {
		return err
	}
	docs := documentClient(base) // one HTTP cache for every public document
	opts := &tools.Options{Agent: agent, Store: a.store, Pages: a.pages, Logger: logger, PublicURL: c.publicURL}
	if c.browser != "" {
		if opts.Browser, err = a.startBrowser(c.browser, guard); err != nil {
			return fmt.Errorf("--browser: %w", err)
		}
		a.cleanup = append(a.cleanup, func() { opts.Browser.Close() })
	}
	a.tools = tools.New(discovery.New(docs, &discovery.Options{Holds: holds}), opts)
	return nil
}

// newPages starts the local pages: on loopback, and with --public-url the
// user's pages under it, opened only by a browser that has shown the
// deployment's bearer token once.
func newPages(c *common, h *httpOptions) (*pages.Server, error) {
	opts := &pages.Options{Addr: c.pagesAddr}
	if c.publicURL != "" {
		opts.PublicURL = strings.TrimSuffix(c.publicURL, "/") + "/pages"
		opts.Gate = pages.NewCredentialGate(h.token) // --public-url requires the token
	}
	p, err := pages.New(opts)
	if err != nil && c.pagesAddr != "" {
		return nil, listenError("--pages-addr", c.pagesAddr, err)
	}
	return p, err
}

// newAgent loads the agent's identity: the demo's own (published by the demo
// Company at agent.example), or the one `poppy-mcp init` made and stored
// (--client-id naming another wins). Without one, poppy-mcp still discovers
// and checks Companies.
func (a *app) newAgent(ctx context.Context, c *common, base http.RoundTripper, holds *retryafter.Holds, logger *slog.Logger) (*auth.Agent, error) {
	var choice identityChoice
	var err error
	if a.demo != nil {
		choice = identityChoice{clientID: "https://" + a.demo.srv.AgentHost() + "/agent.json", opts: &auth.IdentityOptions{Store: a.store}}
	} else if choice, err = chooseIdentity(ctx, a.store, c.clientID, logger); err != nil || choice.clientID == "" {
		return nil, err
	}
	id, err := auth.NewIdentity(ctx, choice.clientID, choice.opts)
	if errors.Is(err, auth.ErrNoIdentity) {
		logger.Warn("no signing key in the state directory " + a.store.Dir() + " for " + choice.clientID +
			": run `poppy-mcp init --client-id " + choice.clientID + "`; only discovery works until then")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if choice.unstored != "" {
		logger.Warn(choice.unstored)
	}
	a.identity = id
	if a.demo != nil {
		agentJSON, err := id.AgentJSON()
		if err != nil {
			return nil, err
		}
		jwks, err := id.JWKSJSON()
		if err != nil {
			return nil, err
		}
		a.demo.srv.SetAgentDocuments(agentJSON, jwks)
	}
	// No client timeout: conversations long-poll and stream; each call is bounded by its ctx,
	// and each phase (dial, TLS, response headers) by the base transport.
	return auth.New(id, &auth.Options{HTTPClient: &http.Client{Transport: base}, Store: a.store, Holds: holds}), nil
}

func (a *app) close() {
	if a.tools != nil {
		a.tools.Close() // background work stops and saves its state first
	}
	if a.pages != nil {
		a.pages.Close()
	}
	if a.store != nil {
		a.store.Close()
	}
	if a.demo != nil {
		a.demo.close()
	}
	for _, f := range a.cleanup {
		f()
	}
}
