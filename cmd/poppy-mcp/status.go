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
	"strings"
	"time"

	"cmp"
	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/internal/doctor"
	"github.com/poppy-mcp/poppy-mcp/internal/published"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/person"
	"github.com/poppy-mcp/poppy-mcp/store"
)

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

// statusOf gathers the report (person.State.Status), with the published
// identity checked unless offline.
func statusOf(ctx context.Context, p *personFlags, offline bool, stderr io.Writer) (*person.StatusReport, error) {
	if ok, err := p.state().Exists(); err != nil || !ok {
		dir, _ := p.state().Directory()
		return nil, cmp.Or(err, error(&noState{dir}))
	}
	ps, err := p.openPerson(ctx, stderr)
	if err != nil {
		return nil, err
	}
	defer ps.Root.Close()
	id, err := loadIdentity(ctx, &p.common, ps.Root, stderr)
	var none *app.NoIdentityError
	if err != nil && !errors.As(err, &none) {
		return nil, err
	}
	rep, err := ps.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	if rep.LogID, err = logIDOf(ctx, ps); err != nil {
		return nil, err
	}
	if id != nil && !offline {
		pc := published.Check(ctx, p.transport(), id)
		rep.Identity.Published = &pc
	}
	return rep, nil
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
func printStatus(u *ui, rep *person.StatusReport, now time.Time) {
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
func printIdentity(u *ui, is *person.IdentityStatus) {
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
			c    published.Doc
		}{{"agent.json", p.AgentJSON}, {"jwks.json", p.JWKS}} {
			rows = append(rows, []string{d.name, u.cell(doctor.DocStatus(d.c)), printable(doctor.DocSummary(d.c))})
		}
	}
	u.table("  ", rows)
}
