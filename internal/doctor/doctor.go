// Package doctor is what `poppy-mcp doctor` checks: what must hold on
// this machine for poppy-mcp to work, checked without changing anything
// but what opening the state always does (tightening its permissions). The
// state directory is private (0700, its files 0600), the state key is
// found (and where), the identity documents are published over HTTPS as
// the state holds them (as a Company reads them, internal/published), the
// clock agrees with a Company's (assertions and DPoP proofs live a
// minute), and the assistants' configurations start a poppy-mcp that
// exists with flags serve accepts (configs.go). cmd/poppy-mcp prints the
// Report.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/published"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// Status words, in the columns of doctor and status.
const (
	StatusOK    = "ok"
	StatusWarn  = "warning"
	StatusError = "error"
	StatusSkip  = "skipped"
	StatusInfo  = "info"
)

// Options are what Run checks.
type Options struct {
	// State is where the state is kept.
	State app.State
	// Identity loads the identity serve would use from the open state
	// (app.LoadIdentity).
	Identity func(ctx context.Context, st *store.Store) (*auth.Identity, error)
	// Transport reaches the identity's URLs and the Company, through the
	// network guard.
	Transport http.RoundTripper
	// Company is the domain whose clock to compare with; "" skips it.
	Company string
	// Home and Cwd are where the assistants' configurations are looked for.
	Home, Cwd string
	// Serve checks a configuration's arguments as serve's parser does.
	Serve func(args []string) error
}

// Report is `doctor --json`'s output.
type Report struct {
	OK      bool           `json:"ok"`
	Checks  []Check        `json:"checks"`
	Configs []ConfigReport `json:"configs"`
}

// Run runs every check; Report.OK is false when one is an error.
func Run(ctx context.Context, o *Options) Report {
	rep := Report{Checks: checks(ctx, o), Configs: checkConfigs(o.Home, o.Cwd, o.Serve)}
	rep.OK = !slices.ContainsFunc(rep.Checks, func(ch Check) bool { return ch.Status == StatusError }) &&
		!slices.ContainsFunc(rep.Configs, func(cr ConfigReport) bool { return cr.Status == StatusError })
	return rep
}

// Clock skew limits: assertions live 60 s (Poppy 0.1 §5: "exp is no more
// than 60 seconds after iat") and a Company accepts DPoP proofs whose iat
// is "within the Company's acceptance window, such as one minute" (§4.3).
const (
	skewWarn  = 10 * time.Second
	skewError = 30 * time.Second
)

// Check is one check.
type Check struct {
	ID      string `json:"id"`
	Status  string `json:"status"` // ok, warning, error, skipped, info
	Message string `json:"message"`
}

// checks runs the checks of the machine and the state.
func checks(ctx context.Context, o *Options) []Check {
	var checks []Check
	dir, err := o.State.Directory()
	if err != nil {
		return []Check{{"state_dir", StatusError, err.Error()}}
	}
	dirCheck, exists := checkStateDir(dir, o.State.Store == "")
	checks = append(checks, dirCheck)
	if exists || o.State.Store != "" {
		checks = append(checks, checkState(ctx, o)...)
	}
	return append(checks, checkClock(ctx, o))
}

// checkStateDir checks the state directory's permissions before the state
// is opened (opening it tightens them, as every poppy-mcp command does):
// the directory 0700, its files 0600. exists is false when there is no
// state directory yet.
func checkStateDir(dir string, sqlite bool) (Check, bool) {
	ch := Check{ID: "state_dir", Status: StatusOK}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && sqlite:
		ch.Status, ch.Message = StatusWarn, "no state directory at "+dir+" yet: run `poppy-mcp init --client-id URL` to make the identity"
		return ch, false
	case errors.Is(err, fs.ErrNotExist):
		ch.Status, ch.Message = StatusInfo, "no state directory at "+dir+" (the state is in PostgreSQL; the directory holds only http-token)"
		return ch, false
	case err != nil:
		ch.Status, ch.Message = StatusError, "cannot read the state directory: "+err.Error()
		return ch, true
	case !fi.IsDir():
		ch.Status, ch.Message = StatusError, dir+" is not a directory"
		return ch, false
	}
	if loose := loosePermissions(dir, fi); len(loose) > 0 {
		ch.Status = StatusError
		ch.Message = "others on this machine could read the state: " + strings.Join(loose, "; ") + ". Opening the state " +
			"tightens them (this doctor just did, as every poppy-mcp command does); if anyone else uses this machine, " +
			"treat the state key and the tokens as exposed: sign out everywhere and start a new state directory"
		return ch, true
	}
	ch.Message = dir + " is 0700, its files 0600"
	return ch, true
}

// loosePermissions says which of the state directory dir (fi) and its
// files others on this machine could read.
func loosePermissions(dir string, fi os.FileInfo) []string {
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
	return loose
}

// checkState opens the state: the key and where it came from, then the
// identity and its published documents.
func checkState(ctx context.Context, o *Options) []Check {
	st, where, err := o.State.Open(ctx)
	if err != nil {
		return []Check{{"state_key", StatusError, app.StateError(where, err).Error()}}
	}
	defer st.Close()
	key := Check{"state_key", StatusOK, "the state key opens " + st.Where() + "; it comes from " + keySourceText(st.KeySource())}
	id, err := o.Identity(ctx, st)
	var none *app.NoIdentityError
	switch {
	case errors.As(err, &none):
		return []Check{key, {"identity", StatusWarn, err.Error()}}
	case err != nil:
		return []Check{key, {"identity", StatusError, err.Error()}}
	}
	ident := Check{"identity", StatusOK, fmt.Sprintf("%s, signing key %s", id.ClientID(), id.CurrentKeyID())}
	p := published.Check(ctx, o.Transport, id)
	return []Check{key, ident, publishedDoctor("agent_json", p.AgentJSON), publishedDoctor("jwks_json", p.JWKS)}
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
func publishedDoctor(id string, d published.Doc) Check {
	return Check{ID: id, Status: DocStatus(d), Message: DocSummary(d)}
}

// checkClock compares the clock with the Date header of the Company's
// poppy.json, with half the round trip as the uncertainty.
func checkClock(ctx context.Context, o *Options) Check {
	company := o.Company
	ch := Check{ID: "clock", Status: StatusSkip, Message: "give --company DOMAIN to compare the clock with a Company's"}
	if company == "" {
		return ch
	}
	host, err := discovery.NormalizeDomain(company)
	if err != nil {
		ch.Status, ch.Message = StatusError, err.Error()
		return ch
	}
	date, rtt, err := companyDate(ctx, o.Transport, "https://"+host+"/.well-known/poppy.json")
	if err != nil {
		ch.Status, ch.Message = StatusError, "could not ask "+host+" the time: "+err.Error()
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
		ch.Status = StatusError
		ch.Message = fmt.Sprintf("this clock is %v %s %s's: Companies refuse assertions and DPoP proofs more than a minute off; set the clock (NTP)", abs, dir, host)
	case abs > skewWarn:
		ch.Status = StatusWarn
		ch.Message = fmt.Sprintf("this clock is %v %s %s's: assertions live a minute, so keep it within a few seconds (NTP)", abs, dir, host)
	default:
		ch.Status, ch.Message = StatusOK, fmt.Sprintf("within %v of %s's (its Date header, to the second)", max(abs, time.Second), host)
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
		return time.Time{}, 0, netguard.Cause(err)
	}
	rtt := time.Since(start)
	resp.Body.Close()
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return time.Time{}, 0, errors.New("its answer has no Date header")
	}
	return date, rtt, nil
}

// DocStatus is a published document's status word.
func DocStatus(c published.Doc) string {
	switch {
	case !c.OK:
		return StatusError
	case len(c.Notes) > 0:
		return StatusWarn
	}
	return StatusOK
}

// DocSummary says what was found at a document's URL.
func DocSummary(c published.Doc) string {
	msgs := slices.Concat(c.Problems, c.Notes)
	if len(msgs) == 0 {
		return "published at " + c.URL + ", the same as the state's"
	}
	return c.URL + ": " + strings.Join(msgs, "; ")
}
