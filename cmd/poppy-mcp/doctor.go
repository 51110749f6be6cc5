package main

// This file is `poppy-mcp doctor`: its flags, and the Report of package
// internal/doctor printed (what must hold on this machine for poppy-mcp to
// work: the state directory private, the state key found, the identity
// published as the state holds it, the clock, the assistants' configs).

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/doctor"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// doctorFlags registers doctor's flags.
func doctorFlags(fs *flag.FlagSet) (c *common, asJSON *bool, company *string) {
	c = new(common)
	c.register(fs)
	asJSON = fs.Bool("json", false, "print one JSON object")
	company = fs.String("company", "", "compare the clock with this Company's, the `DOMAIN` (the Date header of its poppy.json)")
	return c, asJSON, company
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	c, asJSON, company := doctorFlags(fs)
	if !parse(fs, args, stderr) {
		return 2
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "doctor")
	}
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	rep := doctor.Run(ctx, &doctor.Options{
		State: c.state(), Transport: c.transport(), Company: *company, Home: home, Cwd: cwd,
		Identity: func(ctx context.Context, st *store.Store) (*auth.Identity, error) {
			return loadIdentity(ctx, c, st, stderr)
		},
		Serve: func(args []string) error { _, err := parseServe(args, io.Discard); return err },
	})
	if *asJSON {
		writeJSON(stdout, rep)
	} else {
		printDoctor(newUI(stdout), rep)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

// printDoctor prints the checks, then the configurations.
func printDoctor(u *ui, rep doctor.Report) {
	rows := [][]string{}
	// Every string but the status word is printable(): a configuration's
	// server names, paths and arguments are anyone's who could write it.
	for _, ch := range rep.Checks {
		rows = append(rows, []string{u.cell(ch.Status), ch.ID, printable(ch.Message)})
	}
	for _, cr := range rep.Configs {
		msg := cr.Message
		if msg == "" {
			msg = plural(len(cr.Entries), "poppy-mcp entry")
		}
		rows = append(rows, []string{u.cell(cr.Status), cr.App, printable(filepath.Clean(cr.Path) + " (" + cr.Dialect + "): " + msg)})
		for _, e := range cr.Entries {
			name := e.Name
			if e.Where != "" {
				name += " (" + e.Where + ")"
			}
			env := ""
			if len(e.Env) > 0 {
				env = "; sets " + strings.Join(e.Env, ", ") + " (values not shown)"
			}
			rows = append(rows, []string{u.cell(e.Status), "  " + printable(name), printable(e.Message + env)})
		}
	}
	if len(rep.Configs) == 0 {
		rows = append(rows, []string{u.cell(statusInfo), "assistants", "no MCP configuration of Claude Desktop, Claude Code, Cursor or VS Code found"})
	}
	u.table("", rows)
	verdict := "no problem found"
	if !rep.OK {
		verdict = "problems found: see the lines marked error"
	}
	u.line("%s", verdict)
}
