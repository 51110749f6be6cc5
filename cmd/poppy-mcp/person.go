package main

// This file is what status, sign-out and forget share: the state opened as
// the person they act for (a state that serves several people, a hosted
// deployment's, needs --user to say who), the agent's identity, and the
// Company a domain names, from its documents or, when they cannot be used,
// from what the state holds.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// personFlags are the flags of the commands that act for one person.
type personFlags struct {
	common
	user   string // --user ISSUER:SUB
	asJSON bool
	yes    bool
}

// register adds the flags; yes, when not "", is --yes's usage.
func (p *personFlags) register(fs *flag.FlagSet, yes string) {
	p.common.register(fs)
	fs.StringVar(&p.user, "user", "", "in a state that serves several people (hosted mode): the person, as `ISSUER:SUB` of their access token")
	fs.BoolVar(&p.asJSON, "json", false, "print one JSON object")
	if yes != "" {
		fs.BoolVar(&p.yes, "yes", false, yes)
	}
}

// personState is the state opened for one person.
type personState struct {
	root *store.Store // the whole state: the agent's identity; Close it
	st   *store.Store // the person's view
	// user is --user as given; "" for the default user.
	user string
}

// badUsage is a command line that cannot be acted on: exit code 2.
type badUsage struct{ msg string }

func (e *badUsage) Error() string { return e.msg }

// exitCode is 2 for a badUsage, else 1.
func exitCode(err error) int {
	var ue *badUsage
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// openPerson opens the state as the person --user names, or as the one
// person of a single-user state.
func (p *personFlags) openPerson(ctx context.Context) (*personState, error) {
	root, where, err := p.openStore(ctx)
	if err != nil {
		return nil, app.StateError(where, err)
	}
	key, err := p.localUser(ctx, root)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &personState{root: root, st: root.ForUser(key), user: p.user}, nil
}

// localUser is the local user key --user names (mcpauth.User.Key, as the
// hosted mode keys its people), or "" without --user, which a state of
// several people refuses.
func (p *personFlags) localUser(ctx context.Context, root *store.Store) (string, error) {
	users, err := root.LocalUsers(ctx)
	if err != nil {
		return "", err
	}
	if p.user == "" {
		if slices.ContainsFunc(users, func(u string) bool { return u != "" }) {
			return "", &badUsage{"the state in " + root.Where() + " serves several people (hosted mode): say whose with " +
				"--user ISSUER:SUB, the iss and sub of that person's access tokens"}
		}
		return "", nil
	}
	u, err := parseUser(p.user)
	if err != nil {
		return "", err
	}
	return u.Key(), nil
}

// parseUser reads ISSUER:SUB. The issuer is an https URL, so the colon that
// ends it is the first one after its host and port and a path, if any: a
// SUB may hold colons when the issuer has a path; without a path, the last
// colon ends the issuer.
func parseUser(v string) (mcpauth.User, error) {
	bad := &badUsage{fmt.Sprintf("--user %q: want ISSUER:SUB, such as https://login.example.org/realms/people:248289761001", v)}
	rest, ok := strings.CutPrefix(v, "https://")
	if !ok {
		return mcpauth.User{}, bad
	}
	var i int
	if slash := strings.IndexByte(rest, '/'); slash >= 0 {
		i = strings.IndexByte(rest[slash:], ':')
		if i >= 0 {
			i += slash
		}
	} else {
		i = strings.LastIndexByte(rest, ':')
	}
	if i <= 0 || i == len(rest)-1 {
		return mcpauth.User{}, bad
	}
	return mcpauth.User{Issuer: "https://" + rest[:i], Subject: rest[i+1:]}, nil
}

// personAgent loads the agent's identity from the state (the one serve
// uses) and returns an Agent acting for the person, through the network
// guard.
func (p *personFlags) personAgent(ctx context.Context, ps *personState, stderr io.Writer) (*auth.Agent, error) {
	id, err := loadIdentity(ctx, &p.common, ps.root, stderr)
	if err != nil {
		return nil, err
	}
	return auth.New(id, &auth.Options{HTTPClient: &http.Client{Transport: p.transport()}, Store: ps.st}), nil
}

// loadIdentity loads the identity serve would use from the open state st
// (app.LoadIdentity), logging on stderr as the flags say.
func loadIdentity(ctx context.Context, c *common, st *store.Store, stderr io.Writer) (*auth.Identity, error) {
	logger, err := c.logger(stderr)
	if err != nil {
		return nil, err
	}
	return app.LoadIdentity(ctx, st, c.clientID, logger)
}

// companyRef is the Company a domain names.
type companyRef struct {
	domain string // as given, normalised
	issuer string
	// domains are the Company's domains known (Poppy 0.1 §3.2): its
	// metadata's poppy_domains, and those the state recorded.
	domains []string
	// company is what auth needs; only Issuer is set when the documents
	// could not be used.
	company auth.Company
	// docs is the Company's documents, or nil; docErr says why not.
	docs   *discovery.Company
	docErr error
}

// findCompany reads the domain's documents through the network guard and,
// when they cannot be used, finds the Company in what the state holds for
// the person.
func findCompany(ctx context.Context, c *common, st *store.Store, domain string) (*companyRef, error) {
	host, err := discovery.NormalizeDomain(domain)
	if err != nil {
		return nil, &badUsage{err.Error()}
	}
	ref := &companyRef{domain: host}
	co, err := discovery.New(app.DocumentClient(c.transport()), nil).Discover(ctx, host, true)
	if err == nil {
		err = co.Err()
	}
	if err == nil && (co.Document.Auth == nil || co.Metadata == nil) {
		err = errors.New(host + " offers no sign-in server (auth)")
	}
	if err == nil {
		// Poppy 0.1 §3.2: the issuer's metadata was checked against poppy.json.
		ref.docs, ref.issuer = co, co.Document.Auth.Issuer
		ref.company = auth.Company{Issuer: ref.issuer, Domain: co.Document.Organization.Domain,
			TokenEndpoint: co.Metadata.TokenEndpoint, RevocationEndpoint: co.Metadata.RevocationEndpoint}
		ref.domains = slices.Clone(co.Metadata.PoppyDomains)
	} else {
		ref.docErr = err
		if ref.issuer, err = recordedIssuer(ctx, st, host); err != nil {
			return nil, err
		}
		ref.company = auth.Company{Issuer: ref.issuer, Domain: host}
	}
	recorded, err := recordedDomains(ctx, st, ref.issuer)
	if err != nil {
		return nil, err
	}
	ref.domains = sortedUnion(ref.domains, recorded, []string{host})
	return ref, nil
}

// recordedIssuer is the issuer of the Company whose Sessions or
// conversations the state recorded at host, or "" when none.
func recordedIssuer(ctx context.Context, st *store.Store, host string) (string, error) {
	issuers, err := st.Issuers(ctx)
	if err != nil {
		return "", err
	}
	for _, iss := range issuers {
		domains, err := recordedDomains(ctx, st, iss)
		if err != nil {
			return "", err
		}
		if slices.Contains(domains, host) {
			return iss, nil
		}
	}
	return "", nil
}

// recordedDomains are the domains the state recorded Sessions and
// conversations at, for the Company issuer.
func recordedDomains(ctx context.Context, st *store.Store, issuer string) ([]string, error) {
	if issuer == "" {
		return nil, nil
	}
	sessions, err := st.Sessions(ctx, issuer)
	if err != nil {
		return nil, err
	}
	convs, err := st.Conversations(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range sessions {
		out = append(out, s.Domain)
	}
	for _, c := range convs {
		if c.Issuer == issuer {
			out = append(out, c.Domain)
		}
	}
	return sortedUnion(out), nil
}

// sortedUnion is the sorted set of the non-empty strings of lists.
func sortedUnion(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// covered is the Company's domains, the one given first.
func (r *companyRef) covered() []string {
	out := []string{r.domain}
	for _, d := range r.domains {
		if d != r.domain {
			out = append(out, d)
		}
	}
	return out
}
