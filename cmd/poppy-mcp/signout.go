package main

// This file is `poppy-mcp sign-out DOMAIN`: what the sign_out tool does,
// without an assistant in between (Poppy 0.1 §4.9), as package person
// does it: it parses the flags, prints what happened and exits.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/person"
)

// signOutFlags registers sign-out's flags.
func signOutFlags(fs *flag.FlagSet) *personFlags {
	p := new(personFlags)
	p.register(fs, "when the Company cannot revoke the Account Token, delete it here anyway")
	return p
}

func runSignOut(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sign-out", flag.ContinueOnError)
	p := signOutFlags(fs)
	pos, ok := parseInterspersed(fs, args, stderr)
	if !ok {
		return 2
	}
	if len(pos) != 1 {
		return usageError(stderr, "sign-out")
	}
	rep, err := signOut(ctx, p, pos[0], stderr)
	if rep == nil {
		fmt.Fprintln(stderr, "poppy-mcp sign-out:", err)
		return exitCode(err)
	}
	code := 0
	if err != nil {
		rep.Error, code = err.Error(), 1
	}
	if p.asJSON {
		writeJSON(stdout, rep)
		return code
	}
	printSignOut(newUI(stdout), stderr, rep, err, p.yes)
	return code
}

// signOut signs the person out of the Company domain names. A report with
// an error is a revocation that failed.
func signOut(ctx context.Context, p *personFlags, domain string, stderr io.Writer) (*person.SignOutReport, error) {
	ps, err := p.openPerson(ctx, stderr)
	if err != nil {
		return nil, err
	}
	defer ps.Root.Close()
	c, err := p.findCompany(ctx, ps, domain)
	if err != nil {
		return nil, err
	}
	return ps.SignOut(ctx, c, p.yes)
}

// printSignOut says what happened, and with a failure what to do.
func printSignOut(u *ui, stderr io.Writer, rep *person.SignOutReport, err error, forced bool) {
	scopes := ""
	if len(rep.Scopes) > 0 {
		scopes = " (" + strings.Join(rep.Scopes, " ") + ")"
	}
	covers := ""
	if len(rep.Domains) > 1 {
		covers = " It covered all of the Company's domains: " + strings.Join(rep.Domains, ", ") + "."
	}
	switch {
	case err == nil && !rep.Held:
		u.line("poppy-mcp holds no Account Token for %s: nothing to revoke. Any Session still signed in there continues signed out.", rep.Domain)
	case err == nil:
		u.line("Signed out of %s: the Account Token%s was revoked at the Company (%s) and deleted.%s", rep.Domain, scopes, rep.Issuer, covers)
		u.line("A poppy-mcp serve running now continues signed out from its next request.")
	case forced && rep.Deleted:
		fmt.Fprintf(stderr, "poppy-mcp sign-out: could not revoke the Account Token for %s: %v\n", rep.Domain, err)
		u.line("Deleted here anyway (--yes): poppy-mcp no longer holds the Account Token%s for %s, but the Company keeps it valid "+
			"until it expires or you disconnect poppy-mcp in your account settings there.%s", scopes, rep.Domain, covers)
		u.line("A poppy-mcp serve running now starts a new signed-out Session at its next request.")
	default:
		fmt.Fprintf(stderr, "poppy-mcp sign-out: could not revoke the Account Token for %s: %v\n", rep.Domain, err)
		u.line("Nothing was deleted: poppy-mcp still holds the Account Token%s for %s. Try again later, or run again with --yes "+
			"to delete it here anyway (the Company keeps it valid until it expires or you disconnect poppy-mcp in your account settings there).",
			scopes, rep.Domain)
	}
}
