package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// common holds the flags shared by subcommands (docs/tools.md "Commands").
type common struct {
	stateDir  string
	store     string // --store: a PostgreSQL URL; "" keeps the state in SQLite in stateDir
	clientID  string
	logLevel  string
	logFormat string // --log-format
	resolve   resolveFlag
	pagesAddr string
	browser   string        // serve --browser
	tools     toolChoice    // serve --read-only, --toolsets
	evictIdle time.Duration // serve --evict-idle or POPPY_EVICT_IDLE (app.Options.EvictIdle)
	// metrics records serve's metrics (--metrics-addr); nil elsewhere.
	metrics *metrics.Recorder
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.stateDir, "state-dir", "", "keep the state in `DIR` (default $XDG_STATE_HOME/poppy-mcp)")
	fs.StringVar(&c.store, "store", os.Getenv("POPPY_STORE"), "keep the state in PostgreSQL at `URL`, postgres://USER@HOST/DATABASE (or POPPY_STORE; needs POPPY_STATE_KEY; default: SQLite in the state directory)")
	fs.StringVar(&c.clientID, "client-id", os.Getenv("POPPY_CLIENT_ID"), "the agent's client_id `URL` (or POPPY_CLIENT_ID; default: the one init stored)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log at `LEVEL`: debug, info, warn or error (default info)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log lines as `FORMAT`: text (key=value) or json (one object a line) (default text)")
	fs.Var(&c.resolve, "resolve", "reach a name at a local address, past the network guard: `HOST:PORT:ADDR`, like curl's --resolve "+
		"(repeatable). ADDR may carry its own port (127.0.0.1:8443). HOST may be a wildcard, *.example.com, for every name "+
		"under example.com but not example.com itself (as in a TLS certificate): give both")
}

// state is where the flags say the state is kept.
func (c *common) state() app.State {
	return app.State{Dir: c.stateDir, Store: c.store, Metrics: c.metrics}
}

// openStore opens the state (app.State.Open).
func (c *common) openStore(ctx context.Context) (*store.Store, string, error) {
	return c.state().Open(ctx)
}

// logger returns a logger on stderr at the chosen level, in the chosen
// format. stdout is never written by logs: in stdio mode it carries MCP.
func (c *common) logger(stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.logFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", c.logFormat)
}

// guardOptions are the network guard's: no Company URL reaches an address
// that is not public, except the names mapped with --resolve, which reach
// the address they are mapped to (TLS still checks the real name).
func (c *common) guardOptions() *netguard.Options {
	return &netguard.Options{Resolve: c.resolve.lookup}
}

// transport is the base HTTP transport (system roots plus SSL_CERT_FILE,
// Go's default) through the network guard, with a timeout per phase.
func (c *common) transport() http.RoundTripper { return netguard.New(c.guardOptions()).Transport() }

// parse parses flags, writing errors to stderr. It reports false on a usage
// error, after saying where the command's help is: never the flag list,
// whose defaults may come from the environment (POPPY_HTTP_TOKEN).
// A flag that is not defined is said with the nearest one (flagHint), all
// on one line.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) bool {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, "Run 'poppy-mcp %s --help' for its flags.\n", fs.Name())
	case err != nil:
		fmt.Fprintf(stderr, "poppy-mcp %s: %v%s Run 'poppy-mcp %s --help' for its flags.\n", fs.Name(), err, flagHint(fs, err), fs.Name())
	}
	return err == nil
}

// parseInterspersed parses flags that may come after positional arguments
// ("check example.com --json") and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, bool) {
	var pos []string
	for {
		if !parse(fs, args, stderr) {
			return nil, false
		}
		if args = fs.Args(); len(args) == 0 {
			return pos, true
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// This part reads serve's choice of tools (docs/tools.md "Toolsets and
// read-only"): --read-only (POPPY_READ_ONLY) and --toolsets LIST
// (POPPY_TOOLSETS). Which tool is in which group, and which writes, is
// package tools' table; serve only reads the flags and passes them on in
// tools.Options.

// toolChoice is serve's --read-only and --toolsets, read and checked.
type toolChoice struct {
	readOnly    bool
	readOnlyEnv string // POPPY_READ_ONLY as given, checked by check
	list        string // --toolsets as given
	toolsets    tools.Toolsets
}

// register registers --read-only and --toolsets on fs, their defaults from
// the environment.
func (tc *toolChoice) register(fs *flag.FlagSet) {
	tc.readOnlyEnv = os.Getenv("POPPY_READ_ONLY")
	on, _ := strconv.ParseBool(tc.readOnlyEnv) // a bad value is check's error
	fs.BoolVar(&tc.readOnly, "read-only", on, "serve no tool that writes at a Company: no messages sent, no relayed MCP tools, "+
		"API operations GET and HEAD only (or POPPY_READ_ONLY=1)")
	fs.StringVar(&tc.list, "toolsets", os.Getenv("POPPY_TOOLSETS"), "serve only the tool groups in `LIST`, comma-separated: "+
		strings.Join(tools.ToolGroups(), ", ")+" (discovery is always on; or POPPY_TOOLSETS; default all)")
}

// check reads the list of groups; an unknown group, or a POPPY_READ_ONLY
// that is not a boolean, is a start-up error that says what to give.
func (tc *toolChoice) check() error {
	if _, err := strconv.ParseBool(tc.readOnlyEnv); tc.readOnlyEnv != "" && err != nil {
		return fmt.Errorf("POPPY_READ_ONLY=%q: want 1 or 0 (true or false)", tc.readOnlyEnv)
	}
	ts, err := tools.ParseToolsets(tc.list)
	if err != nil {
		return fmt.Errorf("--toolsets (or POPPY_TOOLSETS) %q: %w", tc.list, err)
	}
	tc.toolsets = ts
	return nil
}
