// Command poppy-mcp is a Personal Agent for the Personal Agent Protocol
// (Poppy 0.1), served as an MCP server. See README.md and docs/tools.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/poppy-mcp/poppy-mcp/tools"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// version is what `poppy-mcp version` prints and MCP clients are told: a
// build from a checkout's, or the one a release build stamps in with
// -ldflags "-X main.version=..." (.goreleaser.yaml).
var version = tools.Version

// commands is every subcommand, in the order `poppy-mcp help` lists them.
// Adding a command is adding an entry here (see command): dispatch, the
// help pages and `<command> --help` follow from it.
func commands() []command {
	return []command{
		{name: "serve", summary: "serve MCP over stdio (the default command), or over streamable HTTP with --http",
			usage: []string{
				"serve [--demo] [--browser PATH|auto] [--pages-addr ADDR] [flags]",
				"serve --http ADDR [--http-token T | --no-http-token] [--public-url URL] [--allow-origin ORIGIN]... [flags]",
				"serve --http ADDR --public-url URL --auth-issuer URL [--auth-scope SCOPE]... [--auth-client-id ID] [flags]",
			},
			notes:   "Logs go to stderr only: over stdio, stdout carries MCP. What stops serve from starting is said in one line, with exit status 1.",
			example: "poppy-mcp serve --demo",
			flags:   func(fs *flag.FlagSet) { serveFlags(fs) },
			run:     runServe},
		{name: "check", summary: "validate a Company's discovery documents, or probe the running Company with --live",
			usage: []string{
				"check [--json] [--resolve HOST:PORT:ADDR]... DOMAIN",
				"check --live [--conversations] [--dry-run] [--json] [--state-dir DIR] [--client-id URL] [--resolve HOST:PORT:ADDR]... DOMAIN",
			},
			notes:   "Exit status: 0 no errors, 1 errors found, 2 could not check.",
			example: "poppy-mcp check example.com",
			flags:   func(fs *flag.FlagSet) { checkFlags(fs) },
			run:     withoutStdin(runCheck)},
		{name: "init", summary: "create the agent's signing key; write agent.json and jwks.json to publish",
			usage:   []string{"init --client-id URL [--redirect-uri URL]... [--client-name NAME] [--out DIR] [--rotate] [--state-dir DIR]"},
			notes:   "serve then uses this identity with no --client-id; publish the two files at client_id and jwks_uri.",
			example: "poppy-mcp init --client-id https://agent.example/agent.json --redirect-uri https://agent.example/oauth/callback",
			flags:   func(fs *flag.FlagSet) { initFlags(fs) },
			run:     withoutStdin(runInit)},
		{name: "openapi", summary: "print the tools an OpenAPI document becomes (for API owners)",
			usage:   []string{"openapi [--json] [--domain DOMAIN] [--resolve HOST:PORT:ADDR]... FILE_OR_URL"},
			notes:   "FILE_OR_URL is a file, - for stdin, or an https URL. Exit status: 0 translated, 1 cannot be translated, 2 usage, or it could not be read.",
			example: "poppy-mcp openapi --json --domain example.com openapi.yaml",
			flags:   func(fs *flag.FlagSet) { openAPIFlags(fs) },
			run:     runOpenAPI},
		{name: "demo", summary: "a scripted walk through every capability, against the embedded demo Company",
			usage:   []string{"demo [--log-level LEVEL] [--state-dir DIR]"},
			example: "poppy-mcp demo",
			flags:   func(fs *flag.FlagSet) { demoFlags(fs) },
			run:     withoutStdin(runDemo)},
		{name: "status", summary: "what poppy-mcp holds: the identity, and per Company its sign-in, Sessions and conversations",
			usage: []string{"status [--json] [--offline] [--user ISSUER:SUB] [--state-dir DIR | --store URL] [--resolve HOST:PORT:ADDR]..."},
			notes: "Shows the agent's identity (and whether the documents published at client_id and jwks_uri match it) and, for each Company, " +
				"its Sessions, sign-in and conversations. Never a token or a code. Exit status: 0, or 1 when the state cannot be read or the " +
				"published identity does not match it.",
			example: "poppy-mcp status",
			flags:   func(fs *flag.FlagSet) { statusFlags(fs) },
			run:     withoutStdin(runStatus)},
		{name: "sign-out", summary: "revoke the Account Token held for a Company and delete it, as the sign_out tool does",
			usage: []string{"sign-out [--yes] [--json] [--user ISSUER:SUB] [--state-dir DIR | --store URL] [--resolve HOST:PORT:ADDR]... DOMAIN"},
			notes: "A poppy-mcp serve running now continues signed out from its next request. When the Company cannot revoke the token, " +
				"nothing is deleted unless --yes says to delete it here anyway. Exit status: 0 signed out, or nothing was held; 1 not revoked.",
			example: "poppy-mcp sign-out example.com",
			flags:   func(fs *flag.FlagSet) { signOutFlags(fs) },
			run:     withoutStdin(runSignOut)},
		{name: "forget", summary: "revoke, then delete everything held for a Company, its User ID included",
			usage: []string{"forget [--yes] [--json] [--user ISSUER:SUB] [--state-dir DIR | --store URL] [--resolve HOST:PORT:ADDR]... DOMAIN"},
			notes: "Deletes the User ID (the Company sees a new User next time), Sessions, tokens, conversations with their cursors, pending " +
				"messages, DPoP keys, seen events and translated API catalogs, for every domain of the Company. It asks first, unless --yes; " +
				"when the Company cannot revoke the token, it asks again (--yes: forgets anyway). A poppy-mcp serve running now starts afresh " +
				"at its next use of the Company. Exit status: 0 forgotten, or nothing held; 1 not forgotten, or not revoked.",
			example: "poppy-mcp forget example.com",
			flags:   func(fs *flag.FlagSet) { forgetFlags(fs) },
			run:     runForget},
		{name: "doctor", summary: "check the state directory, the state key, the published identity, the clock and the assistants' MCP configs",
			usage: []string{"doctor [--json] [--company DOMAIN] [--state-dir DIR | --store URL] [--resolve HOST:PORT:ADDR]..."},
			notes: "Changes nothing but tightening the state's permissions. Reads the MCP configurations of Claude Desktop, Claude Code, Cursor " +
				"and VS Code in their usual places, and project ones in the current directory. Exit status: 0 no error (warnings allowed); 1 errors.",
			example: "poppy-mcp doctor --company example.com",
			flags:   func(fs *flag.FlagSet) { doctorFlags(fs) },
			run:     withoutStdin(runDoctor)},
		{name: "version", summary: "print poppy-mcp's version (also --version)",
			usage: []string{"version"}, example: "poppy-mcp version",
			run: withoutStdin(runVersion)},
		{name: "help", summary: "this page, or a command's page: its flags and an example",
			usage: []string{"help [COMMAND]"}, example: "poppy-mcp help serve",
			run: withoutStdin(runHelp)},
	}
}

// run dispatches a subcommand and returns the process exit code. With no
// command word it is serve; shared flags may come before the command word
// (commandLine).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			return runHelp(ctx, args[1:], stdout, stderr)
		case "-version", "--version":
			return runVersion(ctx, args[1:], stdout, stderr)
		}
	}
	name, args := commandLine(args)
	cmd, ok := lookupCommand(name)
	if !ok {
		return unknownCommand(stderr, "poppy-mcp", name)
	}
	if wantsHelp(args) {
		cmd.writeHelp(stdout)
		return 0
	}
	return cmd.run(ctx, args, stdin, stdout, stderr)
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return usageError(stderr, "version")
	}
	fmt.Fprintln(stdout, "poppy-mcp", version)
	return 0
}

// runHelp prints the main help page, or a command's.
func runHelp(_ context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		writeMainHelp(stdout)
		return 0
	case len(args) > 1:
		return usageError(stderr, "help")
	}
	cmd, ok := lookupCommand(args[0])
	if !ok {
		return unknownCommand(stderr, "poppy-mcp help", args[0])
	}
	cmd.writeHelp(stdout)
	return 0
}
