// Command poppytest serves poppytest, the strict reference Company for the
// Personal Agent Protocol (Poppy 0.1), as a program: a test server any
// Personal Agent can be tested against, whatever its language, as ACME
// clients are tested against Pebble.
//
//	go install github.com/poppy-mcp/poppy-mcp/cmd/poppytest@latest
//	poppytest serve [--scenario FILE] [--json] [--fail-on-violation]
//
// It runs every Company host on one TLS listener on loopback, writes its CA
// to a file, prints what a client needs (the hosts, --resolve mappings,
// the CA file, the test accounts, the admin URL), and takes an admin API
// (JSON over HTTP, loopback only, described by OpenAPI at
// /admin/openapi.json) to approve device sign-ins, read one-time codes,
// join conversations as a person, set options and faults, and read the
// protocol violations the agent committed. See docs/poppytest-server.md.
//
// It imports none of poppy-mcp's agent packages: it checks an agent with
// poppytest's own code.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK        = 0
	exitViolation = 1 // --fail-on-violation and the agent broke a rule
	exitUsage     = 2 // bad flags, or serve could not start
)

const version = "0.1.0"

func main() {
	os.Exit(command(os.Args[1:], os.Stdout, os.Stderr))
}

// command runs the command line args and returns the exit code.
func command(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr, nil)
	case "version", "--version":
		fmt.Fprintln(stdout, "poppytest", version)
		return exitOK
	case "help", "-h", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "poppytest: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `poppytest: the strict Poppy 0.1 Company, for testing Personal Agents

  poppytest serve [flags]   serve Companies on one TLS listener, with an admin API
  poppytest version

Run "poppytest serve -h" for its flags; docs/poppytest-server.md has the rest.
`)
}
