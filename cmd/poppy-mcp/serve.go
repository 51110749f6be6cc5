package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/democompany"
	"github.com/poppy-mcp/poppy-mcp/internal/requestid"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// demoDomain is where the embedded demo Company lives (package democompany).
const demoDomain = democompany.Domain

// serveConfig is serve's parsed command line.
type serveConfig struct {
	common
	demo        bool
	http        app.HTTPOptions
	metricsAddr string // --metrics-addr or POPPY_METRICS_ADDR
	// warnings are flags given that this mode ignores, to log at start.
	warnings []string
}

// authClientSecretEnv holds --auth-client-id's secret: never a flag, which
// ps would show.
const authClientSecretEnv = "POPPY_AUTH_CLIENT_SECRET"

// errServeUsage is a command line the flag package refused, having said why.
var errServeUsage = errors.New("usage: poppy-mcp serve [flags]; run 'poppy-mcp serve --help' for them")

// serveFlags registers serve's flags on fs, bound to a new config.
func serveFlags(fs *flag.FlagSet) *serveConfig {
	cfg := &serveConfig{}
	cfg.register(fs)
	fs.BoolVar(&cfg.demo, "demo", false, "serve with the embedded demo Company at "+demoDomain)
	fs.StringVar(&cfg.pagesAddr, "pages-addr", "", "where local pages listen: `ADDR` on loopback, 127.0.0.1:PORT (default 127.0.0.1 on a random port)")
	fs.StringVar(&cfg.http.Addr, "http", "", "serve MCP over streamable HTTP at `ADDR` (endpoint /mcp) instead of stdio; a bare port binds 127.0.0.1")
	fs.StringVar(&cfg.http.Token, "http-token", os.Getenv("POPPY_HTTP_TOKEN"), "HTTP mode: the bearer `TOKEN` clients must send (prefer POPPY_HTTP_TOKEN: ps shows flags; default: one kept in the state directory)")
	fs.BoolVar(&cfg.http.NoToken, "no-http-token", false, "HTTP mode on loopback: serve MCP without a bearer token, to every local process")
	fs.Var((*listFlag)(&cfg.http.AllowOrigins), "allow-origin", "HTTP mode: an `ORIGIN` (scheme://host[:port]) whose web pages may call /mcp (repeatable)")
	fs.StringVar(&cfg.browser, "browser", "", "drive the headless Chromium at `PATH` (\"auto\" finds one) and add the browse_page tool")
	fs.StringVar(&cfg.http.PublicURL, "public-url", "", "HTTP mode: the https `URL` this server is reachable at; serves agent.json, jwks.json and the user's pages there")
	fs.StringVar(&cfg.http.Auth.Issuer, "auth-issuer", "", "HTTP mode with --public-url: accept the access tokens of the OAuth authorization server whose issuer is `URL` instead of a bearer token, one local user per person")
	fs.Var((*listFlag)(&cfg.http.Auth.Scopes), "auth-scope", "with --auth-issuer: a `SCOPE` every access token must carry (repeatable)")
	fs.StringVar(&cfg.http.Auth.ClientID, "auth-client-id", "", "with --auth-issuer: poppy-mcp's client `ID` there, to sign people's browsers in for their pages (secret in "+authClientSecretEnv+")")
	fs.DurationVar(&cfg.http.DrainTimeout, "drain-timeout", app.DefaultDrainTimeout, "HTTP mode: on SIGTERM or SIGINT, how long the tool calls in flight have to finish (new MCP requests get 503 meanwhile)")
	cfg.tools.register(fs)
	cfg.evictIdle = app.DefaultEvictIdle
	fs.Func("evict-idle", "hosted mode: forget what is held in memory for a person idle this `DURATION` (no call in flight, no open stream); "+
		"their state stays in the store (or POPPY_EVICT_IDLE; default 10m; 0 never)", cfg.setEvictIdle)
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", os.Getenv("POPPY_METRICS_ADDR"), "serve Prometheus metrics at /metrics on `ADDR`, a listener of their own, without a token "+
		"(or POPPY_METRICS_ADDR; a bare port binds 127.0.0.1; over stdio too)")
	cfg.http.Auth.ClientSecret = os.Getenv(authClientSecretEnv)
	return cfg
}

// parseServe parses serve's flags and checks them, without starting
// anything; the assistant configs in examples/ are tested against it.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := serveFlags(fs)
	if v, ok := os.LookupEnv("POPPY_EVICT_IDLE"); ok { // --evict-idle, parsed next, overrides it
		if err := cfg.setEvictIdle(v); err != nil {
			return nil, fmt.Errorf("POPPY_EVICT_IDLE: %w", err)
		}
	}
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
	if cfg.http.Addr == "" {
		return cfg, cfg.stdioOnly(fs)
	}
	if err := cfg.http.Check(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// setEvictIdle reads --evict-idle: a duration, 0 for never.
func (cfg *serveConfig) setEvictIdle(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration like 10m, or 0 for never", v)
	}
	if cfg.evictIdle = d; d == 0 {
		cfg.evictIdle = -1 // app.Options: negative never forgets
	}
	return nil
}

// stdioOnly refuses HTTP-only flags that cannot work over stdio, and notes
// those stdio ignores.
func (cfg *serveConfig) stdioOnly(fs *flag.FlagSet) error {
	if cfg.http.PublicURL != "" {
		return errors.New("--public-url needs --http: only HTTP mode serves the pages and documents under it")
	}
	if cfg.http.Auth.Issuer != "" || len(cfg.http.Auth.Scopes) > 0 || cfg.http.Auth.ClientID != "" {
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
		if cfg.browser, err = app.BrowserPath(cfg.browser); err != nil {
			return startupFailure(stderr, err)
		}
	}
	logger, _ := cfg.logger(stderr)
	if cfg.http.Addr != "" { // records logged with a request's context carry its ID
		logger = slog.New(requestid.Handler(logger.Handler()))
	}
	for _, w := range cfg.warnings {
		logger.Warn(w)
	}
	return serve(ctx, cfg, logger, stdin, stdout, stderr)
}

// serve listens (a busy port is said before anything else starts), starts
// the metrics, the demo Company and the App, and serves until ctx ends.
func serve(ctx context.Context, cfg *serveConfig, logger *slog.Logger, stdin io.Reader, stdout, stderr io.Writer) int {
	var ln net.Listener
	if cfg.http.Addr != "" {
		var err error
		if ln, err = net.Listen("tcp", cfg.http.Addr); err != nil {
			return startupFailure(stderr, app.ListenError("--http", cfg.http.Addr, err))
		}
		defer ln.Close()
		cfg.http.URL = "http://" + ln.Addr().String() + "/mcp"
	}
	if cfg.metricsAddr != "" { // before the rest starts: the gauges answer from the start
		rec, stop, err := app.ServeMetrics(cfg.metricsAddr, logger)
		if err != nil {
			return startupFailure(stderr, err)
		}
		defer stop()
		cfg.metrics = rec
	}
	o := cfg.appOptions(logger, stderr)
	if ln != nil {
		o.HTTP = &cfg.http
	}
	a, err := newApp(ctx, o, cfg.demo)
	if err != nil {
		return startupFailure(stderr, err)
	}
	defer a.close()
	if ln != nil {
		err = a.ServeHTTP(ctx, ln)
	} else {
		err = a.ServeStdio(ctx, stdin, stdout, stderr)
	}
	if err != nil {
		logger.Error("serve", "err", err)
		return 1
	}
	return 0
}
