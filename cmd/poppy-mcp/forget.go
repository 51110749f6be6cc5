package main

// This file is `poppy-mcp forget DOMAIN`: the Account Token held for the
// Company is revoked, then everything poppy-mcp holds for the person there
// is deleted, the User ID included (package person does both, Poppy 0.1
// §4.2). It asks first, unless --yes, and prints what was forgotten.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/person"
)

// forgetRun is one forget: its flags, state and questions.
type forgetRun struct {
	p      *personFlags
	ps     *person.State
	stdin  io.Reader
	stderr io.Writer
	rep    *person.ForgetReport
}

// forgetFlags registers forget's flags.
func forgetFlags(fs *flag.FlagSet) *personFlags {
	p := new(personFlags)
	p.register(fs, "do not ask; forget even when the Company cannot revoke the Account Token")
	return p
}

func runForget(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("forget", flag.ContinueOnError)
	p := forgetFlags(fs)
	pos, ok := parseInterspersed(fs, args, stderr)
	if !ok {
		return 2
	}
	if len(pos) != 1 {
		return usageError(stderr, "forget")
	}
	ps, err := p.openPerson(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp forget:", err)
		return exitCode(err)
	}
	defer ps.Root.Close()
	run := &forgetRun{p: p, ps: ps, stdin: stdin, stderr: stderr}
	err = run.forget(ctx, pos[0])
	if run.rep == nil {
		fmt.Fprintln(stderr, "poppy-mcp forget:", err)
		return exitCode(err)
	}
	code := 0
	if err != nil {
		run.rep.Error, code = err.Error(), 1
	}
	if p.asJSON {
		writeJSON(stdout, run.rep)
		return code
	}
	printForget(newUI(stdout), stderr, run.rep, err)
	return code
}

// errNotForgotten is a forget the person declined.
var errNotForgotten = errors.New("nothing was changed")

// forget asks, revokes and deletes. With r.rep set, an error is a forget
// that did not finish, or whose revocation failed.
func (r *forgetRun) forget(ctx context.Context, domain string) error {
	c, err := r.p.findCompany(ctx, r.ps, domain)
	if err != nil {
		return err
	}
	f := r.ps.Forget(c)
	r.rep = f.Report
	if c.Issuer == "" {
		return nil
	}
	h, err := f.Held(ctx)
	if err != nil || !r.rep.Held {
		return err
	}
	if !r.p.yes && !confirm(r.stdin, r.stderr, "poppy-mcp forget: this deletes "+heldText(c, h)+".\nForget "+c.Domain+"?") {
		return errNotForgotten
	}
	revokeErr := f.Revoke(ctx)
	if revokeErr != nil && !r.p.yes && !confirm(r.stdin, r.stderr, fmt.Sprintf("poppy-mcp forget: could not revoke the Account Token: %v.\n"+
		"It stays valid at the Company until it expires or you disconnect poppy-mcp in your account settings there. Forget it here anyway?", revokeErr)) {
		return fmt.Errorf("could not revoke the Account Token (%w): %w", revokeErr, errNotForgotten)
	}
	if err := f.Delete(ctx); err != nil {
		return err
	}
	if revokeErr != nil {
		return fmt.Errorf("could not revoke the Account Token, forgot it anyway: %w", revokeErr)
	}
	return nil
}

// heldText says what a forget of c deletes, for the question.
func heldText(c *person.Company, h person.Holding) string {
	parts := []string{"everything poppy-mcp holds for " + strings.Join(c.Covered(), ", ") + " (one Company, issuer " + c.Issuer + ")"}
	if h.UserID {
		parts = append(parts, "its User ID there (the Company will see a new User next time)")
	}
	if h.AccountToken {
		parts = append(parts, "the Account Token (revoked at the Company first: sign in again to use the account)")
	}
	parts = append(parts, plural(h.Sessions, "Session"), plural(h.Conversations, "conversation")+" (with cursors and messages not yet delivered)")
	return parts[0] + ": " + strings.Join(parts[1:], ", ")
}

// printForget says what was forgotten, or why not.
func printForget(u *ui, stderr io.Writer, rep *person.ForgetReport, err error) {
	if !rep.Held {
		u.line("poppy-mcp holds nothing for %s: nothing to forget.", rep.Domain)
		return
	}
	if !rep.Forgotten {
		fmt.Fprintln(stderr, "poppy-mcp forget:", err)
		return
	}
	d := rep.Deleted
	var parts []string
	if d.UserID {
		parts = append(parts, "its User ID")
	}
	if rep.AccountToken && rep.Revoked {
		parts = append(parts, "the Account Token (revoked)")
	} else if rep.AccountToken {
		parts = append(parts, "the Account Token (NOT revoked: it stays valid at the Company until it expires or you disconnect poppy-mcp there)")
	}
	parts = append(parts, plural(d.Sessions, "Session"), plural(d.Conversations, "conversation"),
		fmt.Sprintf("%d seen events and sent message IDs", d.SeenEvents),
		plural(d.Secrets, "secret")+" (DPoP keys, messages not yet delivered)", plural(d.Catalogs, "translated API catalog"))
	u.line("Forgot %s, every domain of the Company (%s): %s.", rep.Domain, strings.Join(rep.Domains, ", "), strings.Join(parts, ", "))
	u.line("The Company sees a new User next time poppy-mcp talks to it; a poppy-mcp serve running now starts afresh at its next use of it.")
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp forget:", err)
	}
}
