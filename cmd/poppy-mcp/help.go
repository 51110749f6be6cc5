package main

// This file is the command table's machinery: looking a command up, and the
// help pages, `poppy-mcp help` for every command and the shared flags, and
// `poppy-mcp <command> --help` (or `help <command>`) for one command's flags
// and an example. Help goes to stdout with exit status 0: it is not an error.
// A flag's default is never printed from its value, which may come from the
// environment (POPPY_HTTP_TOKEN is a secret); usage strings say defaults in
// words.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one subcommand of poppy-mcp. To add one, add an entry to
// commands() in main.go: name, a one-line summary, its usage lines (after
// "poppy-mcp "), one example, the function that registers its flags (the
// same one its run calls, so the help page lists exactly what it accepts; nil
// for none) and its run function. Usage errors inside run go through
// usageError(stderr, name), which prints the usage lines and exits 2.
type command struct {
	name    string
	summary string   // one line, for `poppy-mcp help`
	usage   []string // synopses, each after "poppy-mcp "
	notes   string   // more to say on its page, such as exit statuses; may be empty
	example string   // one command line
	flags   func(fs *flag.FlagSet)
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// withoutStdin adapts a command's run function that reads no stdin.
func withoutStdin(f func(ctx context.Context, args []string, stdout, stderr io.Writer) int) func(context.Context, []string, io.Reader, io.Writer, io.Writer) int {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return f(ctx, args, stdout, stderr)
	}
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// wantsHelp reports whether args ask for help (-h, -help or --help) before
// a "--" that ends the flags.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// usageError prints the command's usage lines and where its help is, and
// returns the exit status of a usage error.
func usageError(stderr io.Writer, name string) int {
	cmd, _ := lookupCommand(name)
	for i, u := range cmd.usage {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintf(stderr, "%spoppy-mcp %s\n", lead, u)
	}
	fmt.Fprintf(stderr, "Run 'poppy-mcp %s --help' for its flags.\n", name)
	return 2
}

// writeHelp writes the command's page: summary, usage, flags, example.
func (c command) writeHelp(w io.Writer) {
	fmt.Fprintf(w, "poppy-mcp %s: %s\n\nUsage:\n", c.name, c.summary)
	for _, u := range c.usage {
		fmt.Fprintf(w, "  poppy-mcp %s\n", u)
	}
	if c.notes != "" {
		fmt.Fprintf(w, "\n%s", wrap(c.notes, "", 80))
	}
	if c.flags != nil {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		fmt.Fprintln(w, "\nFlags:")
		writeFlags(w, fs)
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n", c.example)
}

// writeMainHelp writes `poppy-mcp help`: the commands and the shared flags.
func writeMainHelp(w io.Writer) {
	fmt.Fprint(w, "poppy-mcp: a Personal Agent for Poppy, as an MCP server\n\n"+
		"Usage:\n  poppy-mcp [COMMAND] [flags]    (no command: serve)\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fs := flag.NewFlagSet("poppy-mcp", flag.ContinueOnError)
	var c common
	c.register(fs)
	fmt.Fprintln(w, "\nFlags shared where they apply:")
	writeFlags(w, fs)
	fmt.Fprint(w, "\nExtra CAs come from SSL_CERT_FILE.\n"+
		"Run 'poppy-mcp COMMAND --help' (or 'poppy-mcp help COMMAND') for a command's flags and an example.\n")
}

// writeFlags lists fs's flags, each as "--name ARG" and its usage on the
// next line. ARG is the usage's back-quoted word (flag.UnquoteUsage).
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n%s", line, wrap(usage, "      ", 80))
	})
}

// wrap breaks text into lines of at most width characters (longer words
// stay whole), each after indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}
