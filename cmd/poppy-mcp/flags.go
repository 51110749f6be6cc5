package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// common holds the flags shared by subcommands (docs/tools.md "Commands").
type common struct {
	stateDir  string
	clientID  string
	logLevel  string
	resolve   resolveFlag
	pagesAddr string
	publicURL string // serve --public-url
	browser   string // serve --browser
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.stateDir, "state-dir", "", "state directory (default $XDG_STATE_HOME/poppy-mcp)")
	fs.StringVar(&c.clientID, "client-id", os.Getenv("POPPY_CLIENT_ID"), "the agent's client_id URL (or POPPY_CLIENT_ID)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Var(&c.resolve, "resolve", "HOST:PORT:ADDR, map a name to a local address like curl's, past the network guard (repeatable)")
}

// openStore opens the state store in --state-dir, or the default directory.
func (c *common) openStore(ctx context.Context) (*store.Store, string, error) {
	dir := c.stateDir
	if dir == "" {
		d, err := store.DefaultDir()
		if err != nil {
			return nil, "", err
		}
		dir = d
	}
	st, err := store.Open(ctx, dir, nil)
	return st, dir, err
}

// logger returns a text logger on stderr at the chosen level. stdout is never
// written by logs: in stdio mode it carries MCP.
func (c *common) logger(stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), nil
}

// guardOptions are the network guard's: no Company URL reaches an address
// that is not public, except the names mapped with --resolve, which reach
// the address they are mapped to (TLS still checks the real name).
func (c *common) guardOptions() *netguard.Options {
	return &netguard.Options{Resolve: c.resolve.lookup}
}

// transport is the base HTTP transport (system roots plus SSL_CERT_FILE,
// Go's default) through the network guard, with a timeout per phase.
func (c *common) transport() *http.Transport { return netguard.New(c.guardOptions()).Transport() }

// documentClient is the client for public documents: cached (package
// cache); discovery bounds each fetch in time.
func documentClient(base http.RoundTripper) *http.Client {
	return &http.Client{Transport: cache.New(base, nil)}
}

// parse parses flags, writing errors to stderr. It reports false on a usage error.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) bool {
	fs.SetOutput(stderr)
	return fs.Parse(args) == nil
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
