package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/mark3labs/mcp-go/server"

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
}

// parseServe parses serve's flags and checks them, without starting
// anything; the assistant configs in examples/ are tested against it.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := &serveConfig{}
	cfg.register(fs)
	fs.BoolVar(&cfg.demo, "demo", false, "serve with the embedded demo Company at "+demoDomain)
	fs.StringVar(&cfg.pagesAddr, "pages-addr", "", "where local pages listen (default 127.0.0.1 on a random port)")
	fs.StringVar(&cfg.http.addr, "http", "", "serve MCP over streamable HTTP at ADDR (endpoint /mcp) instead of stdio")
	fs.StringVar(&cfg.http.token, "http-token", os.Getenv("POPPY_HTTP_TOKEN"), "bearer token HTTP clients must send (required off loopback)")
	fs.StringVar(&cfg.browser, "browser", "", "drive this headless Chromium (\"auto\" finds one) and add the browse_page tool")
	fs.StringVar(&cfg.http.publicURL, "public-url", "", "HTTP mode: the https URL this server is reachable at; serves agent.json, jwks.json and local pages there")
	if !parse(fs, args, stderr) {
		return nil, errors.New("usage: poppy-mcp serve [--demo] [--http ADDR [--http-token T] [--public-url URL]] [flags]")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if _, err := cfg.logger(io.Discard); err != nil {
		return nil, err
	}
	if cfg.http.publicURL != "" && cfg.http.addr == "" {
		return nil, errors.New("--public-url needs --http: only HTTP mode serves the pages and documents under it")
	}
	if cfg.http.addr != "" {
		if err := cfg.http.check(); err != nil {
			return nil, err
		}
	}
	cfg.publicURL = cfg.http.publicURL
	return cfg, nil
}

// runServe serves MCP over stdio, or over streamable HTTP with --http. Logs
// go to stderr only: in stdio mode stdout carries MCP.
func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseServe(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp:", err)
		return 2
	}
	logger, _ := cfg.logger(stderr)
	a, err := newApp(ctx, &cfg.common, cfg.demo, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	defer a.close()
	if cfg.http.addr != "" {
		err = serveHTTP(ctx, a, cfg.http, logger)
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
	stdio := server.NewStdioServer(a.tools.MCP())
	stdio.SetErrorLogger(log.New(stderr, "poppy-mcp: ", 0))
	logger.Info("serving MCP over stdio", "demo", a.demo != nil)
	err := stdio.Listen(ctx, stdin, stdout)
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

func newApp(ctx context.Context, c *common, demo bool, logger *slog.Logger) (a *app, err error) {
	a = &app{}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	guard := c.guardOptions()
	if demo {
		if a.demo, err = startDemoCompany(logger); err != nil {
			return nil, err
		}
		guard = a.demo.guardOptions()
		if c.stateDir == "" { // the demo Company forgets everything on exit: so does the demo agent
			dir, err := os.MkdirTemp("", "poppy-mcp-demo-")
			if err != nil {
				return nil, err
			}
			c.stateDir = dir
			a.cleanup = append(a.cleanup, func() { os.RemoveAll(dir) })
		}
	}
	// One base transport for every Company connection, through the network guard.
	base := netguard.New(guard).Transport()
	if a.store, _, err = c.openStore(ctx); err != nil {
		return nil, err
	}
	pagesOpts := &pages.Options{Addr: c.pagesAddr}
	if c.publicURL != "" {
		pagesOpts.PublicURL = strings.TrimSuffix(c.publicURL, "/") + "/pages"
	}
	if a.pages, err = pages.New(pagesOpts); err != nil {
		return nil, err
	}
	holds := &retryafter.Holds{} // Poppy 0.1 §4.3: a 429 on any endpoint holds it for every request
	agent, err := a.newAgent(ctx, c, base, holds, logger)
	if err != nil {
		return nil, err
	}
	docs := documentClient(base) // one HTTP cache for every public document
	deps := tools.Deps{
		Discovery: discovery.New(docs, &discovery.Options{Holds: holds}),
		Agent:     agent, Store: a.store, Pages: a.pages, Logger: logger,
		PublicURL: c.publicURL,
	}
	if c.browser != "" {
		if deps.Browser, err = a.startBrowser(c.browser, guard); err != nil {
			return nil, fmt.Errorf("--browser: %w", err)
		}
		a.cleanup = append(a.cleanup, func() { deps.Browser.Close() })
	}
	a.tools = tools.New(deps)
	return a, nil
}

// newAgent loads the agent's identity: the demo's own (published by the demo
// Company at agent.example), or the one `poppy-mcp init` made for --client-id.
// Without one, poppy-mcp still discovers and checks Companies.
func (a *app) newAgent(ctx context.Context, c *common, base http.RoundTripper, holds *retryafter.Holds, logger *slog.Logger) (*auth.Agent, error) {
	clientID, mustExist := c.clientID, true
	if a.demo != nil {
		clientID, mustExist = "https://"+a.demo.srv.AgentHost()+"/agent.json", false
	}
	if clientID == "" {
		logger.Warn("no agent identity: only discovery works. Run `poppy-mcp init --client-id URL`, publish the two files, and pass --client-id")
		return nil, nil
	}
	id, err := auth.NewIdentity(ctx, clientID, &auth.IdentityOptions{Store: a.store, MustExist: mustExist})
	if errors.Is(err, auth.ErrNoIdentity) {
		logger.Warn("no signing key in the state directory for " + clientID + ": run `poppy-mcp init --client-id " + clientID + "`; only discovery works until then")
		return nil, nil
	}
	if err != nil {
		return nil, err
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
