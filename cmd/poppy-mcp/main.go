// Command poppy-mcp is a Personal Agent for the Personal Agent Protocol
// (Poppy 0.1), served as an MCP server. See README.md and TOOLS.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/poppy-mcp/poppy-mcp/tools"
)

const usage = `poppy-mcp: a Personal Agent for Poppy, as an MCP server

Usage:
  poppy-mcp [serve] [--demo] [flags]    MCP server over stdio (logs to stderr)
  poppy-mcp check [--json] DOMAIN       validate a Company's discovery documents
  poppy-mcp check --live [--conversations] [--dry-run] [--json] DOMAIN
                                        probe the running Company under the agent's identity
  poppy-mcp init --client-id URL [--redirect-uri URL]... [--out DIR] [--rotate]
                                        create the agent's signing key; write agent.json and jwks.json
  poppy-mcp openapi [--json] [--domain DOMAIN] FILE_OR_URL
                                        print the tools an OpenAPI document becomes
  poppy-mcp demo                        a scripted walk against the embedded demo Company
  poppy-mcp status [--json]             what poppy-mcp holds: identity, Companies, sign-ins, conversations
  poppy-mcp sign-out [--yes] DOMAIN     revoke the Account Token held for a Company, and delete it
  poppy-mcp forget [--yes] DOMAIN       revoke, then delete everything held for a Company, User ID included
  poppy-mcp doctor [--company DOMAIN]   check the state directory, key, published identity, clock and assistant configs
  poppy-mcp version

Flags shared where they apply:
  --state-dir DIR          state directory (default $XDG_STATE_HOME/poppy-mcp)
  --client-id URL          the agent's client_id (or POPPY_CLIENT_ID)
  --resolve HOST:PORT:ADDR map a name to a local address, like curl's (repeatable)
  --log-level LEVEL        debug, info, warn or error (default info)
Extra CAs come from SSL_CERT_FILE.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stdin, stdout, stderr)
	case "check":
		return runCheck(ctx, args, stdout, stderr)
	case "init":
		return runInit(ctx, args, stdout, stderr)
	case "openapi":
		return runOpenAPI(ctx, args, stdin, stdout, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "status":
		return runStatus(ctx, args, stdout, stderr)
	case "sign-out":
		return runSignOut(ctx, args, stdout, stderr)
	case "forget":
		return runForget(ctx, args, stdin, stdout, stderr)
	case "doctor":
		return runDoctor(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "poppy-mcp", tools.Version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "poppy-mcp: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
