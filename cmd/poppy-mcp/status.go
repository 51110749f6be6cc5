package main

// This file is `poppy-mcp status`: what poppy-mcp holds for the person,
// without an assistant in between. The identity (client_id, key IDs, and
// whether the documents published at its URLs are the ones the state holds),
// then each Company: its domains, issuer, Sessions, whether signed in and
// with which scopes, when the Account Token was last used, and its open
// conversations. Never a token or a code: the state's secrets stay in it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/person"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// statusReport is `status --json`'s output.
type statusReport struct {
	State     string `json:"state"`
	KeySource string `json:"key_source"`
	User      string `json:"user,omitempty"`
	// LogID is the ID serve's logs name the --user person by ("user=..."),
	// keyed by the deployment's secret; "" before serve ever made one.
	LogID     string          `json:"log_id,omitempty"`
	Identity  *identityStatus `json:"identity"` // null without one
	Companies []companyStatus `json:"companies"`
}

// identityStatus is the agent's identity (Poppy 0.1 §4.1).
type identityStatus struct {
	ClientID string      `json:"client_id"`
	JWKSURI  string      `json:"jwks_uri"`
	Keys     []keyStatus `json:"keys"`
	// Published is the documents at client_id and jwks_uri compared with
	// the state; null with --offline.
	Published *publishedCheck `json:"published"`
}

// keyStatus is one public key in jwks.json.
type keyStatus struct {
	KeyID   string `json:"kid"`
	Signing bool   `json:"signing"`
}

// companyStatus is what the state holds at one Company.
type companyStatus struct {
	Issuer  string   `json:"issuer"`
	Domains []string `json:"domains"`
	// SignedIn: an Account Token is held, so Sessions start signed in.
	SignedIn     bool              `json:"signed_in"`
	Scopes       []string          `json:"scopes"`
	AccountToken *tokenStatus      `json:"account_token"` // null when none is held
	Sessions     []sessionStatus   `json:"sessions"`
	Open         int               `json:"open_conversations"`
	Convs        []conversationRow `json:"conversations"`
}

// tokenStatus describes the Account Token held, never the token.
type tokenStatus struct {
	LastUsed  time.Time `json:"last_used"`           // zero: not recorded
	ExpiresAt time.Time `json:"expires_at,omitzero"` // zero: no expiry
	Expired   bool      `json:"expired"`
}

// sessionStatus is a Session as the process using it last recorded it.
type sessionStatus struct {
	ID        string    `json:"session_id"`
	Domain    string    `json:"domain"`
	SignedIn  bool      `json:"signed_in"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"token_expires_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
}

// conversationRow is one conversation held.
type conversationRow struct {
	ID     string `json:"conversation_id"`
	Domain string `json:"domain"`
	Status string `json:"status"`
	Closed bool   `json:"closed"`
}

// statusFlags registers status's flags.
func statusFlags(fs *flag.FlagSet) (p *personFlags, offline *bool) {
	p = new(personFlags)
	p.register(fs, "")
	return p, fs.Bool("offline", false, "do not fetch the published identity documents")
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	p, offline := statusFlags(fs)
	if !parse(fs, args, stderr) {
		return 2
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "status")
	}
	rep, err := statusOf(ctx, p, *offline, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp status:", err)
		return exitCode(err)
	}
	code := 0
	if rep.Identity != nil && rep.Identity.Published != nil && !rep.Identity.Published.OK() {
		code = 1
	}
	if p.asJSON {
		writeJSON(stdout, rep)
		return code
	}
	printStatus(newUI(stdout), rep, time.Now())
	return code
}

// noState is a SQLite state that is not there: status reports it and
// makes none.
type noState struct{ dir string }

func (e *noState) Error() string {
	return "no state in " + e.dir + ": poppy-mcp holds nothing there yet, and status made nothing. " +
		"`poppy-mcp init --client-id URL` makes the identity there (give --state-dir DIR, or --store URL, if the state is elsewhere)"
}

// stateExists is nil when the state can be opened without making it:
// PostgreSQL (--store), whose tables the database holds, or a state
// directory that holds the SQLite database. Opening a missing one would
// make the directory, the database and a state key.
func stateExists(p *personFlags) error {
	if p.store != "" {
		return nil
	}
	dir, err := p.state().Directory()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); errors.Is(err, fs.ErrNotExist) { // store's file
		return &noState{dir}
	}
	return nil
}

// statusOf gathers the report.
func statusOf(ctx context.Context, p *personFlags, offline bool, stderr io.Writer) (*statusReport, error) {
	if err := stateExists(p); err != nil {
		return nil, err
	}
	ps, err := p.openPerson(ctx, stderr)
	if err != nil {
		return nil, err
	}
	defer ps.Root.Close()
	rep := &statusReport{State: ps.Root.Where(), KeySource: ps.Root.KeySource(), User: ps.User, Companies: []companyStatus{}}
	if rep.LogID, err = logIDOf(ctx, ps); err != nil {
		return nil, err
	}
	id, err := loadIdentity(ctx, &p.common, ps.Root, stderr)
	var none *app.NoIdentityError
	switch {
	case err == nil:
		rep.Identity = identityOf(id)
		if !offline {
			pc := checkPublished(ctx, p.transport(), id)
			rep.Identity.Published = &pc
		}
	case !errors.As(err, &none):
		return nil, err
	}
	issuers, err := ps.Store.Issuers(ctx)
	if err != nil {
		return nil, err
	}
	for _, iss := range issuers {
		cs, err := companyOf(ctx, ps.Store, iss)
		if err != nil {
			return nil, err
		}
		rep.Companies = append(rep.Companies, cs)
	}
	return rep, nil
}

func identityOf(id *auth.Identity) *identityStatus {
	md := id.Metadata()
	is := &identityStatus{ClientID: md.ClientID, JWKSURI: md.JWKSURI}
	for _, k := range id.JWKS().Keys {
		is.Keys = append(is.Keys, keyStatus{KeyID: k.KeyID, Signing: k.KeyID == id.CurrentKeyID()})
	}
	return is
}

// companyOf is what the state holds at the Company issuer.
func companyOf(ctx context.Context, st *store.Store, issuer string) (companyStatus, error) {
	cs := companyStatus{Issuer: issuer, Scopes: []string{}, Sessions: []sessionStatus{}, Convs: []conversationRow{}}
	sessions, err := st.Sessions(ctx, issuer)
	if err != nil {
		return cs, err
	}
	for _, s := range sessions {
		cs.Sessions = append(cs.Sessions, sessionStatus{ID: s.ID, Domain: s.Domain, SignedIn: s.SignedIn,
			Scopes: nonNil(s.Scopes), ExpiresAt: s.ExpiresAt, UpdatedAt: s.UpdatedAt})
	}
	convs, err := st.Conversations(ctx, "")
	if err != nil {
		return cs, err
	}
	for _, c := range convs {
		if c.Issuer == issuer {
			cs.Convs = append(cs.Convs, conversationRow{ID: c.ID, Domain: c.Domain, Status: c.Status, Closed: c.Closed})
			if !c.Closed {
				cs.Open++
			}
		}
	}
	if cs.Domains, err = person.RecordedDomains(ctx, st, issuer); err != nil {
		return cs, err
	}
	cs.Domains = nonNil(cs.Domains)
	userID, err := st.FindUserID(ctx, issuer)
	if err != nil {
		return cs, nil // no User ID: no Account Token either
	}
	tok, err := st.AccountToken(ctx, issuer, userID, auth.DefaultAccountLabel)
	if err != nil {
		return cs, nil // none held (or one that does not decrypt: status says none)
	}
	expired := !tok.ExpiresAt.IsZero() && !time.Now().Before(tok.ExpiresAt)
	cs.AccountToken = &tokenStatus{LastUsed: tok.UsedAt, ExpiresAt: tok.ExpiresAt, Expired: expired}
	cs.SignedIn, cs.Scopes = !expired, nonNil(tok.Scopes)
	return cs, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// logIDOf is the log ID of ps's --user person, as serve computes it from
// the deployment's secret in the state: "" without --user or before serve
// made the secret.
func logIDOf(ctx context.Context, ps *person.State) (string, error) {
	if ps.User == "" {
		return "", nil
	}
	secret, err := app.StoredDeploymentSecret(ctx, ps.Root)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	u, err := person.ParseUser(ps.User)
	if err != nil {
		return "", err
	}
	ids, err := mcpauth.NewLogIDs(secret)
	if err != nil {
		return "", err
	}
	return ids.Of(u), nil
}

// printStatus prints the report for a person.
func printStatus(u *ui, rep *statusReport, now time.Time) {
	who := ""
	if rep.User != "" {
		who = ", for " + rep.User
	}
	if rep.LogID != "" {
		who += ", in logs user=" + rep.LogID
	}
	u.line("%s %s (state key from %s%s)", u.bold("State"), rep.State, rep.KeySource, who)
	u.line("")
	printIdentity(u, rep.Identity)
	u.line("")
	if len(rep.Companies) == 0 {
		u.line("%s none yet: poppy-mcp holds nothing for any Company.", u.bold("Companies"))
		return
	}
	u.line("%s", u.bold("Companies"))
	rows := [][]string{{"DOMAINS", "ISSUER", "SIGNED IN", "SCOPES", "ACCOUNT TOKEN LAST USED", "SESSIONS", "OPEN CONVERSATIONS"}}
	for _, c := range rep.Companies {
		signed, used := "no", "-"
		if c.SignedIn {
			signed = "yes"
		}
		if c.AccountToken != nil {
			used = when(c.AccountToken.LastUsed, now)
			switch {
			case c.AccountToken.Expired:
				signed = "no (token expired)"
			case !c.AccountToken.ExpiresAt.IsZero():
				signed = "yes, until " + when(c.AccountToken.ExpiresAt, now)
			}
		}
		// A Company's names and scopes are its own to choose: printable.
		rows = append(rows, []string{printable(dashIfEmpty(strings.Join(c.Domains, ", "))), printable(c.Issuer), signed,
			printable(dashIfEmpty(strings.Join(c.Scopes, " "))), used, fmt.Sprint(len(c.Sessions)), fmt.Sprint(c.Open)})
	}
	u.table("  ", rows)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printIdentity prints the identity and its published documents.
func printIdentity(u *ui, is *identityStatus) {
	if is == nil {
		u.line("%s none: run `poppy-mcp init --client-id https://YOUR.HOST/agent.json` and publish the two files it writes.", u.bold("Identity"))
		return
	}
	u.line("%s %s", u.bold("Identity"), is.ClientID)
	rows := [][]string{}
	for _, k := range is.Keys {
		role := "retired (published for seven days after a rotation)"
		if k.Signing {
			role = "signing"
		}
		rows = append(rows, []string{"key", k.KeyID, role})
	}
	if p := is.Published; p != nil {
		for _, d := range []struct {
			name string
			c    docCheck
		}{{"agent.json", p.AgentJSON}, {"jwks.json", p.JWKS}} {
			rows = append(rows, []string{d.name, u.cell(docStatus(d.c)), printable(docSummary(d.c))})
		}
	}
	u.table("  ", rows)
}

// docStatus is a published document's status word.
func docStatus(c docCheck) string {
	switch {
	case !c.OK:
		return statusError
	case len(c.Notes) > 0:
		return statusWarn
	}
	return statusOK
}

// docSummary says what was found at a document's URL.
func docSummary(c docCheck) string {
	msgs := slices.Concat(c.Problems, c.Notes)
	if len(msgs) == 0 {
		return "published at " + c.URL + ", the same as the state's"
	}
	return c.URL + ": " + strings.Join(msgs, "; ")
}
