package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// checkReport is `check --json`'s output.
type checkReport struct {
	Domain string `json:"domain"`
	// OK: no error finding at all (warnings allowed).
	OK bool `json:"ok"`
	// Usable: no finding blocks use. A Company with errors only in what
	// poppy-mcp skips (an unsupported extension, one MCP API) is usable.
	Usable   bool                `json:"usable"`
	Findings []discovery.Finding `json:"findings"`
	Error    string              `json:"error,omitempty"` // set when the Company could not be checked
}

// checkConfig is check's parsed command line.
type checkConfig struct {
	common
	asJSON bool
	live   *liveFlags
}

// checkFlags registers check's flags on fs, bound to a new config.
func checkFlags(fs *flag.FlagSet) *checkConfig {
	cfg := &checkConfig{live: &liveFlags{}}
	cfg.register(fs)
	fs.BoolVar(&cfg.asJSON, "json", false, "print one JSON object")
	cfg.live.register(fs)
	return cfg
}

// runCheck validates a Company's public documents as an agent reads them,
// or with --live probes the running Company (check_live.go). It never signs
// in. Exit 0: no errors; 1: errors found; 2: could not check.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	cfg := checkFlags(fs)
	c, lf := &cfg.common, cfg.live
	pos, ok := parseInterspersed(fs, args, stderr)
	if !ok {
		return 2 // said on one line, with the nearest flag
	}
	if len(pos) != 1 || !lf.live && (lf.conversations || lf.dryRun) {
		return usageError(stderr, "check")
	}
	if lf.live {
		return runCheckLive(ctx, c, *lf, cfg.asJSON, pos[0], stdout, stderr)
	}
	d := discovery.New(app.DocumentClient(c.transport()), nil)
	co, err := d.Discover(ctx, pos[0], true)
	rep := checkReport{Domain: pos[0], Findings: []discovery.Finding{}}
	if co != nil {
		rep.Domain, rep.Usable = co.Domain, co.OK()
		if co.Findings != nil {
			rep.Findings = co.Findings
		}
		rep.OK = !slices.ContainsFunc(rep.Findings, func(f discovery.Finding) bool { return f.Severity == discovery.Error })
	}
	code := 1
	switch {
	case err != nil:
		rep.OK, rep.Usable, rep.Error, code = false, false, err.Error(), 2
	case rep.OK:
		code = 0
	}
	if cfg.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return code
	}
	printReport(stdout, stderr, rep, err)
	return code
}

func printReport(stdout, stderr io.Writer, rep checkReport, err error) {
	var inErr *discovery.InputError
	if errors.As(err, &inErr) {
		fmt.Fprintf(stderr, "poppy-mcp check: %v\n", err)
		return
	}
	printFindings(stdout, rep.Domain, rep.Findings)
	if err != nil {
		fmt.Fprintf(stderr, "poppy-mcp check: could not check %s: %v\n", rep.Domain, err)
		return
	}
	errs, warns := 0, 0
	for _, f := range rep.Findings {
		if f.Severity == discovery.Error {
			errs++
		} else {
			warns++
		}
	}
	verdict := "usable"
	switch {
	case !rep.Usable:
		verdict = "NOT usable"
	case errs > 0:
		verdict = "usable (the errors are in parts poppy-mcp skips)"
	}
	fmt.Fprintf(stdout, "%s: %d error(s), %d warning(s): %s\n", rep.Domain, errs, warns, verdict)
}

// printFindings prints the documents' findings, one a line.
func printFindings(w io.Writer, domain string, findings []discovery.Finding) {
	for _, f := range findings {
		note := ""
		if f.Severity == discovery.Error && !f.BlocksUse {
			note = " (skipped by poppy-mcp: does not block use)"
		}
		fmt.Fprintf(w, "%s: %-7s §%-4s %s%s\n", domain, f.Severity, f.Section, f.Message, note)
	}
}
