package main

// This file is `poppy-mcp doctor`: what must hold on this machine for
// poppy-mcp to work, checked without changing anything but what opening the
// state always does (tightening its permissions). The state directory
// is private (0700, its files 0600), the state key is found (and where), the
// identity documents are published over HTTPS as the state holds them (as a
// Company reads them, published.go), the clock agrees with a Company's
// (--company; assertions and DPoP proofs live a minute), and the
// assistants' configurations start a poppy-mcp that exists with flags serve
// accepts (doctor_configs.go).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// Clock skew limits: assertions live 60 s (Poppy 0.1 §5: "exp is no more
// than 60 seconds after iat") and a Company accepts DPoP proofs whose iat
// is "within the Company's acceptance window, such as one minute" (§4.3).
const (
	skewWarn  = 10 * time.Second
	skewError = 30 * time.Second
)

// doctorCheck is one check.

type doctorCheck struct {
	ID      string `json:"id"`
	Status  string `json:"status"` // ok, warning, error, skipped, info
	Message string `json:"message"`
}

// doctorReport is `doctor --json`'s output.
type doctorReport struct {
	OK      bool           `json:"ok"`
	Checks  []doctorCheck  `json:"checks"`
	Configs []configReport `json:"configs"`
}

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
	rep := doctorReport{Checks: doctorChecks(ctx, c, *company, stderr), Configs: checkConfigs(home, cwd)}
	rep.OK = !slices.ContainsFunc(rep.Checks, func(ch doctorCheck) bool { return ch.Status == statusError }) &&
		!slices.ContainsFunc(rep.Configs, func(cr configReport) bool { return cr.Status == statusError })
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

// doctorChecks runs the checks of the machine and the state.
func doctorChecks(ctx context.Context, c *common, company string, stderr io.Writer) []doctorCheck {
	var checks []doctorCheck
	dir, err := c.state().Directory()
	if err != nil {
		return []doctorCheck{{"state_dir", statusError, err.Error()}}
	}
	dirCheck, exists := checkStateDir(dir, c.store == "")
	checks = append(checks, dirCheck)
	if exists || c.store != "" {
		checks = append(checks, checkState(ctx, c, stderr)...)
	}
	return append(checks, checkClock(ctx, c, company))
}

// checkStateDir checks the state directory's permissions before the state
// is opened (opening it tightens them, as every poppy-mcp command does):
// the directory 0700, its files 0600. exists is false when there is no
// state directory yet.
func checkStateDir(dir string, sqlite bool) (doctorCheck, bool) {
	ch := doctorCheck{ID: "state_dir", Status: statusOK}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && sqlite:
		ch.Status, ch.Message = statusWarn, "no state directory at "+dir+" yet: run `poppy-mcp init --client-id URL` to make the identity"
		return ch, false
	case errors.Is(err, fs.ErrNotExist):
		ch.Status, ch.Message = statusInfo, "no state directory at "+dir+" (the state is in PostgreSQL; the directory holds only http-token)"
		return ch, false
	case err != nil:
		ch.Status, ch.Message = statusError, "cannot read the state directory: "+err.Error()
		return ch, true
	case !fi.IsDir():
		ch.Status, ch.Message = statusError, dir+" is not a directory"
		return ch, false
	}
	var loose []string
	if fi.Mode().Perm()&0o077 != 0 {
		loose = append(loose, fmt.Sprintf("%s is %04o, want 0700", dir, fi.Mode().Perm()))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if info.Mode().Perm()&0o077 != 0 {
			loose = append(loose, fmt.Sprintf("%s is %04o, want 0600", e.Name(), info.Mode().Perm()))
		}
	}
	if len(loose) > 0 {
		ch.Status = statusError
		ch.Message = "others on this machine could read the state: " + strings.Join(loose, "; ") + ". Opening the state " +
			"tightens them (this doctor just did, as every poppy-mcp command does); if anyone else uses this machine, " +
			"treat the state key and the tokens as exposed: sign out everywhere and start a new state directory"
		return ch, true
	}
	ch.Message = dir + " is 0700, its files 0600"
	return ch, true
}

// checkState opens the state: the key and where it came from, then the
// identity and its published documents.
func checkState(ctx context.Context, c *common, stderr io.Writer) []doctorCheck {
	st, where, err := c.openStore(ctx)
	if err != nil {
		return []doctorCheck{{"state_key", statusError, app.StateError(where, err).Error()}}
	}
	defer st.Close()
	key := doctorCheck{"state_key", statusOK, "the state key opens " + st.Where() + "; it comes from " + keySourceText(st.KeySource())}
	id, err := loadIdentity(ctx, c, st, stderr)
	var none *app.NoIdentityError
	switch {
	case errors.As(err, &none):
		return []doctorCheck{key, {"identity", statusWarn, err.Error()}}
	case err != nil:
		return []doctorCheck{key, {"identity", statusError, err.Error()}}
	}
	ident := doctorCheck{"identity", statusOK, fmt.Sprintf("%s, signing key %s", id.ClientID(), id.CurrentKeyID())}
	p := checkPublished(ctx, c.transport(), id)
	return []doctorCheck{key, ident, publishedDoctor("agent_json", p.AgentJSON), publishedDoctor("jwks_json", p.JWKS)}
}

// keySourceText says where the state key came from.
func keySourceText(source string) string {
	switch source {
	case "env":
		return "POPPY_STATE_KEY"
	case "keychain":
		return "the OS keychain"
	case "file":
		return "the file state.key in the state directory (no keychain answered)"
	}
	return source
}

// publishedDoctor is a published document's check.
func publishedDoctor(id string, d docCheck) doctorCheck {
	return doctorCheck{ID: id, Status: docStatus(d), Message: docSummary(d)}
}

// checkClock compares the clock with the Date header of the Company's
// poppy.json, with half the round trip as the uncertainty.
func checkClock(ctx context.Context, c *common, company string) doctorCheck {
	ch := doctorCheck{ID: "clock", Status: statusSkip, Message: "give --company DOMAIN to compare the clock with a Company's"}
	if company == "" {
		return ch
	}
	host, err := discovery.NormalizeDomain(company)
	if err != nil {
		ch.Status, ch.Message = statusError, err.Error()
		return ch
	}
	date, rtt, err := companyDate(ctx, c.transport(), "https://"+host+"/.well-known/poppy.json")
	if err != nil {
		ch.Status, ch.Message = statusError, "could not ask "+host+" the time: "+err.Error()
		return ch
	}
	skew := time.Until(date.Add(rtt / 2)).Round(time.Second)
	abs := max(skew, -skew)
	dir := "ahead of"
	if skew > 0 {
		dir = "behind"
	}
	switch {
	case abs > skewError:
		ch.Status = statusError
		ch.Message = fmt.Sprintf("this clock is %v %s %s's: Companies refuse assertions and DPoP proofs more than a minute off; set the clock (NTP)", abs, dir, host)
	case abs > skewWarn:
		ch.Status = statusWarn
		ch.Message = fmt.Sprintf("this clock is %v %s %s's: assertions live a minute, so keep it within a few seconds (NTP)", abs, dir, host)
	default:
		ch.Status, ch.Message = statusOK, fmt.Sprintf("within %v of %s's (its Date header, to the second)", max(abs, time.Second), host)
	}
	return ch
}

// companyDate GETs url and returns its Date header and the round trip.
func companyDate(ctx context.Context, rt http.RoundTripper, url string) (time.Time, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return time.Time{}, 0, err
	}
	start := time.Now()
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return time.Time{}, 0, unwrapNet(err)
	}
	rtt := time.Since(start)
	resp.Body.Close()
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return time.Time{}, 0, errors.New("its answer has no Date header")
	}
	return date, rtt, nil
}

// printDoctor prints the checks, then the configurations.
func printDoctor(u *ui, rep doctorReport) {
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
