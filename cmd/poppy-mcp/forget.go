package main

// This file is `poppy-mcp forget DOMAIN`: the Account Token held for the
// Company is revoked (as sign-out does), then everything poppy-mcp holds for
// the person there is deleted, the User ID included, so that the Company
// sees a new User next time (Poppy 0.1 §4.2: one User ID per User per
// Company, and a Company is its issuer, so the User ID and everything else
// cover all of the issuer's domains, §3.2). It asks first, unless --yes.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// forgetReport is `forget --json`'s output.
type forgetReport struct {
	Domain  string   `json:"domain"`
	Issuer  string   `json:"issuer"`
	Domains []string `json:"domains"`
	// Held: poppy-mcp held something for the Company.
	Held bool `json:"held"`
	// Forgotten: it was deleted.
	Forgotten bool `json:"forgotten"`
	// AccountToken: one was held; Revoked: the Company revoked it.
	AccountToken bool `json:"account_token"`
	Revoked      bool `json:"revoked"`
	// Deleted counts what was deleted.
	Deleted forgetCounts `json:"deleted"`
	Error   string       `json:"error,omitempty"`
}

// forgetCounts counts records.
type forgetCounts struct {
	UserID        bool `json:"user_id"`
	Sessions      int  `json:"sessions"`
	Conversations int  `json:"conversations"`
	SeenEvents    int  `json:"seen_events"`
	Secrets       int  `json:"secrets"` // DPoP keys and pending messages
	Catalogs      int  `json:"catalogs"`
}

// forgetRun is one forget: its flags, state and questions.
type forgetRun struct {
	p      *personFlags
	ps     *personState
	ref    *companyRef
	stdin  io.Reader
	stderr io.Writer
	rep    *forgetReport
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
	ps, err := p.openPerson(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp forget:", err)
		return exitCode(err)
	}
	defer ps.root.Close()
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
	ref, err := findCompany(ctx, &r.p.common, r.ps.st, domain)
	if err != nil {
		return err
	}
	r.ref = ref
	r.rep = &forgetReport{Domain: ref.domain, Issuer: ref.issuer, Domains: ref.covered()}
	if ref.issuer == "" {
		return nil
	}
	held, err := r.held(ctx)
	if err != nil || !r.rep.Held {
		return err
	}
	if !r.p.yes && !confirm(r.stdin, r.stderr, "poppy-mcp forget: this deletes "+held+".\nForget "+ref.domain+"?") {
		return errNotForgotten
	}
	revokeErr := r.revoke(ctx)
	if revokeErr != nil && !r.p.yes && !confirm(r.stdin, r.stderr, fmt.Sprintf("poppy-mcp forget: could not revoke the Account Token: %v.\n"+
		"It stays valid at the Company until it expires or you disconnect poppy-mcp in your account settings there. Forget it here anyway?", revokeErr)) {
		return fmt.Errorf("could not revoke the Account Token (%w): %w", revokeErr, errNotForgotten)
	}
	f, err := r.ps.st.Forget(ctx, ref.issuer)
	if err != nil {
		return err
	}
	r.rep.Forgotten = true
	r.rep.Deleted = forgetCounts{UserID: f.UserID != "", Sessions: f.Sessions, Conversations: f.Conversations,
		SeenEvents: f.SeenEvents, Secrets: f.Secrets}
	if r.rep.Deleted.Catalogs, err = r.forgetCatalogs(ctx); err != nil {
		return err
	}
	if revokeErr != nil {
		return fmt.Errorf("could not revoke the Account Token, forgot it anyway: %w", revokeErr)
	}
	return nil
}

// held fills in what is held, and says it for the question.
func (r *forgetRun) held(ctx context.Context) (string, error) {
	st, iss := r.ps.st, r.ref.issuer
	userID, err := st.FindUserID(ctx, iss)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	sessions, err := st.Sessions(ctx, iss)
	if err != nil {
		return "", err
	}
	convs, err := st.Conversations(ctx, "")
	if err != nil {
		return "", err
	}
	convs = slices.DeleteFunc(convs, func(c store.Conversation) bool { return c.Issuer != iss })
	if userID != "" {
		if _, err := st.AccountToken(ctx, iss, userID, auth.DefaultAccountLabel); err == nil {
			r.rep.AccountToken = true
		}
	}
	r.rep.Held = userID != "" || len(sessions) > 0 || len(convs) > 0
	parts := []string{"everything poppy-mcp holds for " + strings.Join(r.ref.covered(), ", ") + " (one Company, issuer " + iss + ")"}
	if userID != "" {
		parts = append(parts, "its User ID there (the Company will see a new User next time)")
	}
	if r.rep.AccountToken {
		parts = append(parts, "the Account Token (revoked at the Company first: sign in again to use the account)")
	}
	parts = append(parts, plural(len(sessions), "Session"), plural(len(convs), "conversation")+" (with cursors and messages not yet delivered)")
	return parts[0] + ": " + strings.Join(parts[1:], ", "), nil
}

// revoke revokes the Account Token, when one is held.
func (r *forgetRun) revoke(ctx context.Context) error {
	if !r.rep.AccountToken {
		return nil
	}
	if r.ref.docErr != nil {
		return fmt.Errorf("the documents of %s could not be used: %w", r.ref.domain, r.ref.docErr)
	}
	userID, err := r.ps.st.FindUserID(ctx, r.ref.issuer)
	if err != nil {
		return err
	}
	agent, err := r.p.personAgent(ctx, r.ps, r.stderr)
	if err != nil {
		return err
	}
	res, err := agent.SignOutUser(ctx, r.ref.company, userID, false)
	r.rep.Revoked = res.Revoked
	return err
}

// forgetCatalogs deletes the translated API catalogs of the Company's
// documents: those kept under an OpenAPI URL its poppy.json names, or on
// one of its domains or their hosts (api.example.com). Catalogs are shared
// by the people of a hosted state and hold nothing of anyone's: with --user
// they are kept.
func (r *forgetRun) forgetCatalogs(ctx context.Context) (int, error) {
	if r.ps.user != "" {
		return 0, nil
	}
	var urls []string
	if r.ref.docs != nil {
		for _, a := range r.ref.docs.Document.APIs {
			urls = append(urls, a.URL)
		}
	}
	names, err := r.ps.root.BlobNames(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if !slices.Contains(urls, name) && !onDomains(name, r.ref.domains) {
			continue
		}
		if err := r.ps.root.DeleteBlob(ctx, name); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// onDomains reports whether rawURL is an https URL on one of domains or a
// host under one.
func onDomains(rawURL string, domains []string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return false
	}
	host := strings.ToLower(u.Host)
	return slices.ContainsFunc(domains, func(d string) bool { return host == d || strings.HasSuffix(host, "."+d) })
}

// printForget says what was forgotten, or why not.
func printForget(u *ui, stderr io.Writer, rep *forgetReport, err error) {
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
