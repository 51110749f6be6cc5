package main

// This file is `check --live`: it probes a running Company under the
// identity `init` made (package livecheck), after saying on stderr what it
// is about to do and under which identity, or with --dry-run only says it.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/livecheck"
)

// liveFlags are check's flags for --live.
type liveFlags struct {
	live, conversations, dryRun bool
}

func (l *liveFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.live, "live", false, "probe the running Company under poppy-mcp's identity (see README: use a test identity)")
	fs.BoolVar(&l.conversations, "conversations", false, "with --live: also probe conversations (starts one conversation at the Company, and closes it)")
	fs.BoolVar(&l.dryRun, "dry-run", false, "with --live: read the public documents and print what would be sent, sending none of it")
}

// liveReport is `check --live --json`'s output.
type liveReport struct {
	Domain   string `json:"domain"`
	ClientID string `json:"client_id"`
	// OK: no error in the documents nor in any probe.
	OK          bool                `json:"ok"`
	Usable      bool                `json:"usable"`
	Findings    []discovery.Finding `json:"findings"`
	Checks      []livecheck.Check   `json:"checks"`
	Requests    int                 `json:"requests"`
	MaxRequests int                 `json:"max_requests"`
	Error       string              `json:"error,omitempty"` // set when the Company could not be checked
}

// livePlan is `check --live --dry-run --json`'s output.
type livePlan struct {
	Domain      string              `json:"domain"`
	ClientID    string              `json:"client_id"`
	Usable      bool                `json:"usable"`
	Findings    []discovery.Finding `json:"findings"`
	Plan        []livecheck.Step    `json:"plan"`
	MaxRequests int                 `json:"max_requests"`
	Error       string              `json:"error,omitempty"`
}

// runCheckLive probes domain. Exit 0: no errors; 1: errors found; 2:
// could not check.
func runCheckLive(ctx context.Context, c *common, lf liveFlags, asJSON bool, domain string, stdout, stderr io.Writer) int {
	id, dir, err := liveIdentity(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp check --live:", err)
		return 2
	}
	checker := livecheck.New(id, &livecheck.Options{Transport: c.transport(), Conversations: lf.conversations})
	if lf.dryRun {
		steps, rep, err := checker.Plan(ctx, domain)
		return printPlan(stdout, stderr, asJSON, steps, rep, err)
	}
	fmt.Fprint(stderr, liveNotice(domain, id, dir, lf.conversations))
	rep, err := checker.Run(ctx, domain)
	out := liveReport{Domain: rep.Domain, ClientID: rep.ClientID, OK: rep.OK() && err == nil, Usable: rep.Usable,
		Findings: rep.Findings, Checks: rep.Checks, Requests: rep.Requests, MaxRequests: rep.MaxRequests}
	code := 0
	switch {
	case err != nil:
		out.Error, code = err.Error(), 2
	case !out.OK:
		code = 1
	}
	if asJSON {
		writeJSON(stdout, out)
		return code
	}
	printLive(stdout, out)
	if err != nil {
		fmt.Fprintf(stderr, "poppy-mcp check --live: %v\n", err)
	}
	return code
}

// liveIdentity loads the identity serve would use: the one init stored in
// the state directory, or the one --client-id names.
func liveIdentity(ctx context.Context, c *common, stderr io.Writer) (*auth.Identity, string, error) {
	st, dir, err := c.openStore(ctx)
	if err != nil {
		return nil, dir, app.StateError(dir, err)
	}
	defer st.Close()
	todo := "`poppy-mcp init --client-id URL --state-dir " + dir + "`"
	if app.IsPostgres(dir) {
		todo = "`poppy-mcp init --client-id URL` " + app.SameState(dir)
	}
	id, err := loadIdentity(ctx, c, st, stderr)
	var none *app.NoIdentityError
	if errors.As(err, &none) {
		return nil, dir, fmt.Errorf("no identity in %s: run %s, publish the two files it writes, then run check --live again", dir, todo)
	}
	return id, dir, err
}

// liveNotice is what a run says on stderr before it sends anything.
func liveNotice(domain string, id *auth.Identity, dir string, conversations bool) string {
	convs := ""
	if conversations {
		convs = "; with --conversations it starts one conversation there and closes it"
	}
	return fmt.Sprintf(`poppy-mcp check --live: probing %s as %s (signing key %s, from %s).
  Some probes break the protocol on purpose under this identity: a replayed assertion, DPoP proofs
  for another request or key, a request without a proof, a Session Token in a URL. Poppy 0.1 §4.1
  lets a Company revoke a client_id that misuses the protocol: probe with a test identity of its own
  (poppy-mcp init --client-id URL --state-dir DIR, publish its files, then check --live --state-dir DIR).
  It starts signed-out Sessions only, never signs in, sends APIs GET requests only,
  and sends at most %d requests%s.
`, domain, id.ClientID(), id.CurrentKeyID(), dir, livecheck.DefaultMaxRequests, convs)
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// sectionLabel is "§4.2" for a section of Poppy, or the RFC's own reference.
func sectionLabel(s string) string {
	if strings.HasPrefix(s, "RFC") {
		return s
	}
	return "§" + s
}

// printLive prints a run for a person: the documents' findings, one line
// per probe, and a summary.
func printLive(w io.Writer, rep liveReport) {
	printFindings(w, rep.Domain, rep.Findings)
	n := map[livecheck.Status]int{}
	security := 0
	for _, ch := range rep.Checks {
		n[ch.Status]++
		if ch.Security {
			security++
		}
	}
	for _, l := range liveLines(rep.Checks) {
		fmt.Fprintf(w, "%s: %-7s %-12s %s [%s]\n", rep.Domain, l.status, sectionLabel(l.section), printable(l.msg), strings.Join(l.ids, ", "))
	}
	if !rep.Usable && rep.Error == "" {
		fmt.Fprintf(w, "%s: the documents block use: nothing was probed\n", rep.Domain)
	}
	for _, f := range rep.Findings {
		if f.Severity == discovery.Error {
			n[livecheck.Failed]++
		} else {
			n[livecheck.Warned]++
		}
	}
	fmt.Fprintf(w, "%s: %d error(s), %d warning(s), %d ok, %d skipped; %d of at most %d requests sent\n", rep.Domain,
		n[livecheck.Failed], n[livecheck.Warned], n[livecheck.Passed], n[livecheck.Skipped], rep.Requests, rep.MaxRequests)
	if security > 0 {
		fmt.Fprintf(w, "%s: SECURITY: it accepted %d request(s) it must refuse: see the lines marked SECURITY\n", rep.Domain, security)
	}
}

// liveLine is one line of printLive: one probe, or several that said the
// same.
type liveLine struct {
	status, section, msg string
	ids, sections        []string
}

// liveLines are the probes' lines, in their order. A warning or a skip
// that repeats (the same advice: the words after its first "; ", or the
// whole message when it has none) is said once, where
// it first came, with the count of probes and all their IDs; errors are
// each said, as they each need fixing.
func liveLines(checks []livecheck.Check) []liveLine {
	var lines []liveLine
	seen := map[string]int{} // group key -> index in lines
	for _, ch := range checks {
		status, msg := string(ch.Status), ch.Message
		if ch.Security {
			status, msg = "ERROR", "SECURITY: "+msg
		}
		if ch.Security || ch.Status != livecheck.Warned && ch.Status != livecheck.Skipped {
			lines = append(lines, liveLine{status, ch.Section, msg, []string{ch.ID}, nil})
			continue
		}
		advice := msg
		if _, after, ok := strings.Cut(msg, "; "); ok {
			advice = after
		}
		key := status + "\x00" + advice
		if i, ok := seen[key]; ok {
			l := &lines[i]
			l.ids = append(l.ids, ch.ID)
			if !slices.Contains(l.sections, ch.Section) {
				l.sections = append(l.sections, ch.Section)
			}
			l.msg = fmt.Sprintf("%s (%d probes%s)", advice, len(l.ids), otherSections(l.sections))
			continue
		}
		seen[key] = len(lines)
		lines = append(lines, liveLine{status, ch.Section, msg, []string{ch.ID}, []string{ch.Section}})
	}
	return lines
}

// otherSections names the sections of a line's probes when they are not
// all the one its column shows.
func otherSections(sections []string) string {
	if len(sections) < 2 {
		return ""
	}
	labels := make([]string, len(sections))
	for i, s := range sections {
		labels[i] = sectionLabel(s)
	}
	return ", " + strings.Join(labels, " ")
}

// printPlan prints what a run would send.
func printPlan(stdout, stderr io.Writer, asJSON bool, steps []livecheck.Step, rep *livecheck.Report, err error) int {
	code := 0
	switch {
	case err != nil:
		code = 2
	case !rep.Usable:
		code = 1
	}
	if asJSON {
		out := livePlan{Domain: rep.Domain, ClientID: rep.ClientID, Usable: rep.Usable, Findings: rep.Findings,
			Plan: steps, MaxRequests: rep.MaxRequests}
		if out.Plan == nil {
			out.Plan = []livecheck.Step{}
		}
		if err != nil {
			out.Error = err.Error()
		}
		writeJSON(stdout, out)
		return code
	}
	printFindings(stdout, rep.Domain, rep.Findings)
	if code != 0 {
		if err != nil {
			fmt.Fprintf(stderr, "poppy-mcp check --live: %v\n", err)
		}
		fmt.Fprintf(stdout, "%s: nothing would be probed\n", rep.Domain)
		return code
	}
	fmt.Fprintf(stdout, "%s: check --live would send these probes as %s, at most %d requests (%d spent reading the public documents):\n",
		rep.Domain, rep.ClientID, rep.MaxRequests, rep.Requests)
	for _, s := range steps {
		line := s.Does
		if s.Skip != "" {
			line = "skipped: " + s.Skip
		}
		fmt.Fprintf(stdout, "  %-26s %-12s %s\n", s.ID, sectionLabel(s.Section), line)
	}
	return 0
}
