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
	"github.com/poppy-mcp/poppy-mcp/democompany"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/requestid"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// demoDomain is where the embedded demo Company lives (package democompany).
const demoDomain = democompany.Domain

// serveConfig is serve's parsed command line.
type serveConfig struct {
	common
	demo        bool
	http        httpOptions
	metricsAddr string // --metrics-addr or POPPY_METRICS_ADDR
	// warnings are flags given that this mode ignores, to log at start.
	warnings []string
}

// errServeUsage is a command line the flag package refused, having said why.
var errServeUsage = errors.New("usage: poppy-mcp serve [flags]; run 'poppy-mcp serve --help' for them")

// serveFlags registers serve's flags on fs, bound to a new config.
func serveFlags(fs *flag.FlagSet) *serveConfig {
	cfg := &serveConfig{}
	cfg.register(fs)
	fs.BoolVar(&cfg.demo, "demo", false, "serve with the embedded demo Company at "+demoDomain)
	fs.StringVar(&cfg.pagesAddr, "pages-addr", "", "where local pages listen: `ADDR` on loopback, 127.0.0.1:PORT (default 127.0.0.1 on a random port)")
	fs.StringVar(&cfg.http.addr, "http", "", "serve MCP over streamable HTTP at `ADDR` (endpoint /mcp) instead of stdio; a bare port binds 127.0.0.1")
	fs.StringVar(&cfg.http.token, "http-token", os.Getenv("POPPY_HTTP_TOKEN"), "HTTP mode: the bearer `TOKEN` clients must send (prefer POPPY_HTTP_TOKEN: ps shows flags; default: one kept in the state directory)")
	fs.BoolVar(&cfg.http.noToken, "no-http-token", false, "HTTP mode on loopback: serve MCP without a bearer token, to every local process")
	fs.Var(&cfg.http.allowOrigins, "allow-origin", "HTTP mode: an `ORIGIN` (scheme://host[:port]) whose web pages may call /mcp (repeatable)")
	fs.StringVar(&cfg.browser, "browser", "", "drive the headless Chromium at `PATH` (\"auto\" finds one) and add the browse_page tool")
	fs.StringVar(&cfg.http.publicURL, "public-url", "", "HTTP mode: the https `URL` this server is reachable at; serves agent.json, jwks.json and the user's pages there")
	fs.StringVar(&cfg.http.auth.issuer, "auth-issuer", "", "HTTP mode with --public-url: accept the access tokens of the OAuth authorization server whose issuer is `URL` instead of a bearer token, one local user per person")
	fs.Var(&cfg.http.auth.scopes, "auth-scope", "with --auth-issuer: a `SCOPE` every access token must carry (repeatable)")
	fs.StringVar(&cfg.http.auth.clientID, "auth-client-id", "", "with --auth-issuer: poppy-mcp's client `ID` there, to sign people's browsers in for their pages (secret in "+authClientSecretEnv+")")
	fs.DurationVar(&cfg.http.drainTimeout, "drain-timeout", defaultDrainTimeout, "HTTP mode: on SIGTERM or SIGINT, how long the tool calls in flight have to finish (new MCP requests get 503 meanwhile)")
	cfg.tools.register(fs)
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", os.Getenv("POPPY_METRICS_ADDR"), "serve Prometheus metrics at /metrics on `ADDR`, a listener of their own, without a token "+
		"(or POPPY_METRICS_ADDR; a bare port binds 127.0.0.1; over stdio too)")
	cfg.http.auth.clientSecret = os.Getenv(authClientSecretEnv)
	return cfg
}

// parseServe parses serve's flags and checks them, without starting
// anything; the assistant configs in examples/ are tested against it.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := serveFlags(fs)
	if !parse(fs, args, stderr) {
		return nil, errServeUsage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if _, err := cfg.logger(io.Discard); err != nil {
		return nil, err
	}
	if err := cfg.tools.check(); err != nil {
		return nil, err
	}
	if cfg.pagesAddr != "" && !pages.IsLoopback(cfg.pagesAddr) {
		return nil, fmt.Errorf("--pages-addr %q: local pages listen on loopback only (127.0.0.1:PORT); the user's pages go under --public-url", cfg.pagesAddr)
	}
	if err := cfg.checkMetricsAddr(); err != nil {
		return nil, err
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
	if cfg.http.auth.issuer != "" || len(cfg.http.auth.scopes) > 0 || cfg.http.auth.clientID != "" {
		return errors.New("--auth-issuer, --auth-scope and --auth-client-id need --http and --public-url: over stdio the MCP client is the one person")
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
	if errors.Is(err, errServeUsage) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp:", err)
		return 2
	}
	if cfg.browser != "" { // a wrong path is said now, not at the first browse_page
		if cfg.browser, err = browserPath(cfg.browser); err != nil {
			return startupFailure(stderr, err)
		}
	}
	logger, _ := cfg.logger(stderr)
	if cfg.http.addr != "" { // records logged with a request's context carry its ID
		logger = slog.New(requestid.Handler(logger.Handler()))
	}
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
	if cfg.metricsAddr != "" { // before the rest starts: the gauges answer from the start
		stop, err := serveMetrics(cfg, logger)
		if err != nil {
			return startupFailure(stderr, err)
		}
		defer stop()
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
	demo     *democompany.Company
	store    *store.Store
	pages    *pages.Server
	identity *auth.Identity // nil without one
	// noIdentity says, when identity is nil, what is missing and what to run.
	noIdentity string
	hosted     *hosted // with --auth-issuer; else nil
	cleanup    []func()
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
		if a.demo, err = democompany.Start(logger); err != nil {
			return err
		}
		guard = a.demo.GuardOptions()
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
	// Poppy 0.1 §4.3: a 429 on any endpoint holds it for every request.
	holds := &retryafter.Holds{}
	// One HTTP cache for every public document; what reaches the network is counted.
	docs := discovery.New(documentClient(c.metrics.Transport(base, metrics.Fixed(metrics.EndpointDocument))), &discovery.Options{Holds: holds})
	var dir string
	if a.store, dir, err = c.openStore(ctx); err != nil {
		return stateError(dir, err)
	}
	if o.http != nil && o.http.auth.issuer != "" {
		if a.hosted, err = newHosted(ctx, o.http, a.store, docs, base, logger); err != nil {
			return err
		}
		// Records logged with a person's context name them by the log ID
		// the deployment's secret keys (docs/architecture.md "People in logs").
		logger = slog.New(mcpauth.LogHandler(logger.Handler(), a.hosted.resource.LogIDs()))
	} else if o.http != nil {
		tokenDir, err := c.stateDirectory()
		if err != nil {
			return err
		}
		if err := o.http.resolveToken(tokenDir, o.stderr); err != nil {
			return err
		}
	}
	if a.pages, err = newPages(c, o.http, a.hosted); err != nil {
		return err
	}
	agent, err := a.newAgent(ctx, c, c.metrics.Transport(base, metrics.EndpointKind), holds, logger)
	if err != nil {
		return err
	}
	opts := &tools.Options{
		Agent: agent, Store: a.store, Pages: a.pages, Logger: logger,
		PublicURL: c.publicURL, NoIdentity: a.noIdentity, Metrics: c.metrics, Version: version,
		ReadOnly: c.tools.readOnly, Toolsets: c.tools.toolsets,
	}
	c.tools.log(logger)
	if c.browser != "" {
		if opts.Browser, err = a.startBrowser(c.browser, guard); err != nil {
			return fmt.Errorf("--browser: %w", err)
		}
		a.cleanup = append(a.cleanup, func() { opts.Browser.Close() })
	}
	a.tools = tools.New(docs, opts)
	return nil
}

// newPages starts the local pages: on loopback, and with --public-url the
// user's pages under it, opened only by a browser that has shown the
// deployment's bearer token once or, in hosted mode, by the browser of the
// person each page is for, signed in with the issuer.
func newPages(c *common, h *httpOptions, hosted *hosted) (*pages.Server, error) {
	opts := &pages.Options{Addr: c.pagesAddr}
	if c.publicURL != "" {
		opts.PublicURL = strings.TrimSuffix(c.publicURL, "/") + "/pages"
		switch {
		case hosted == nil:
			opts.Gate = pages.NewCredentialGate(h.token) // --public-url requires the token
		case hosted.login != nil:
			opts.Gate = hosted.login
		} // hosted without a Login: no Gate, every public page answers 403
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
		choice = identityChoice{clientID: "https://" + a.demo.Server().AgentHost() + "/agent.json", from: "the demo", opts: &auth.IdentityOptions{Store: a.store}}
	} else if choice, err = chooseIdentity(ctx, a.store, c.clientID, logger); err != nil {
		return nil, err
	}
	var id *auth.Identity
	if choice.clientID != "" {
		id, err = auth.NewIdentity(ctx, choice.clientID, choice.opts)
	}
	if choice.clientID == "" || errors.Is(err, auth.ErrNoIdentity) {
		// What is missing is said in the log and by every tool that needs a Session.
		if a.noIdentity = choice.missing; a.noIdentity == "" {
			a.noIdentity = noSigningKey(a.store, choice)
		}
		logger.Warn("no agent identity, only discovery works: " + a.noIdentity)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if choice.unstored != "" {
		logger.Warn(choice.unstored)
	}
	logger.Info("agent identity", "client_id", choice.clientID, "from", choice.from, "key", id.CurrentKeyID())
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
		a.demo.Server().SetAgentDocuments(agentJSON, jwks)
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
		a.demo.Close()
	}
	for _, f := range a.cleanup {
		f()
	}
}
