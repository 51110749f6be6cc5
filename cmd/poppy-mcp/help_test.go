package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
)

// runIn runs poppy-mcp in this process and returns stdout, stderr and the
// exit status.
func runIn(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// TestMainHelp: `poppy-mcp help`, `--help` and `-h` print the same page, on
// stdout with exit status 0: every command of the table with its summary,
// and the shared flags. Before, `--help` and `-h` went to serve, which
// printed its own flags in the flag package's form on stderr and exited 2.
func TestMainHelp(t *testing.T) {
	t.Parallel()
	want, errOut, code := runIn(t, "help")
	if code != 0 || errOut != "" {
		t.Fatalf("help: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}} {
		if out, errOut, code := runIn(t, args...); code != 0 || out != want || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q, and a page other than help's:\n%s", args, code, errOut, out)
		}
	}
	for _, c := range commands() {
		if !strings.Contains(want, "\n  "+c.name+" ") || !strings.Contains(want, c.summary) {
			t.Errorf("help does not list %s with its summary", c.name)
		}
	}
	for _, shared := range []string{"--state-dir DIR", "--store URL", "--client-id URL", "--resolve HOST:PORT:ADDR", "--log-level LEVEL", "*.example.com"} {
		if !strings.Contains(want, shared) {
			t.Errorf("help lacks the shared flag %q", shared)
		}
	}
	if strings.Contains(want, "--http-token") || strings.Contains(want, "-http-token string") {
		t.Error("the main help page shows serve's flags")
	}
}

// TestCommandHelp: `poppy-mcp CMD --help`, `CMD -h` and `help CMD` print
// the command's page, on stdout with exit status 0: its usage, every flag it
// accepts as --name with a placeholder for its value, and one example.
// Before, `CMD --help` exited 2 with the flag package's -name list.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			page, errOut, code := runIn(t, "help", c.name)
			if code != 0 || errOut != "" {
				t.Fatalf("help %s: exit %d, stderr %q", c.name, code, errOut)
			}
			for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {c.name, "example.com", "--help"}} {
				if out, errOut, code := runIn(t, args...); code != 0 || out != page || errOut != "" {
					t.Errorf("%v: exit %d, stderr %q, page:\n%s", args, code, errOut, out)
				}
			}
			if !strings.Contains(page, "Usage:\n  poppy-mcp "+c.name) || !strings.Contains(page, "Example:\n  poppy-mcp "+c.name) {
				t.Errorf("page without usage or example:\n%s", page)
			}
			if c.flags == nil {
				return
			}
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			fs.VisitAll(func(f *flag.Flag) {
				arg, _ := flag.UnquoteUsage(f)
				if arg == "string" || arg == "value" || arg == "int" {
					t.Errorf("--%s has no placeholder for its value (%q): back-quote one in its usage", f.Name, arg)
				}
				if !strings.Contains(page, "\n  --"+f.Name+" "+arg) && !strings.Contains(page, "\n  --"+f.Name+"\n") {
					t.Errorf("the page does not list --%s", f.Name)
				}
			})
		})
	}
}

// TestHelpShowsNoSecret: a flag's default from the environment is never
// printed, by the help page or by a usage error. Before, `serve --help` and
// any mistyped flag printed POPPY_HTTP_TOKEN's value as --http-token's
// default, on stderr, which assistants keep in their logs.
func TestHelpShowsNoSecret(t *testing.T) {
	const token = "s3cret-bearer-token-do-not-print"
	t.Setenv("POPPY_HTTP_TOKEN", token)
	t.Setenv("POPPY_STORE", "postgres://u:hunter2@db.test/poppy")
	for _, args := range [][]string{{"serve", "--help"}, {"--bogus"}, {"serve", "--bogus"}, {"init", "--bogus"}, {"check", "--json"}} {
		out, errOut, code := runIn(t, args...)
		if strings.Contains(out+errOut, token) || strings.Contains(out+errOut, "hunter2") {
			t.Errorf("%v shows a secret from the environment:\n%s%s", args, out, errOut)
		}
		if code == 2 && (strings.Contains(errOut, "-http-token") || !strings.Contains(errOut, "--help' for its flags")) {
			t.Errorf("%v: a usage error lists the flags instead of saying where they are:\n%s", args, errOut)
		}
	}
}

// TestVersionFlag: `poppy-mcp --version` is `poppy-mcp version`. Before, it
// was taken as a flag of serve and refused.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	want, _, code := runIn(t, "version")
	if code != 0 || !strings.HasPrefix(want, "poppy-mcp ") {
		t.Fatalf("version: exit %d, %q", code, want)
	}
	if out, errOut, code := runIn(t, "--version"); code != 0 || out != want {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestUnknownCommand: an unknown command or help topic is a usage error
// that says where the commands are.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"frobnicate"}, {"help", "frobnicate"}} {
		if _, errOut, code := runIn(t, args...); code != 2 || !strings.Contains(errOut, "'poppy-mcp help'") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
