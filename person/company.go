package person

import (
	"context"
	"errors"
	"slices"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// Company is the Company a domain names.
type Company struct {
	Domain string // as given, normalised
	Issuer string // "" when neither its documents nor the state name one
	// Domains are the Company's domains known (Poppy 0.1 §3.2): its
	// metadata's poppy_domains, and those the state recorded.
	Domains []string
	// Auth is what auth needs; only Issuer is set when the documents
	// could not be used.
	Auth auth.Company
	// Docs is the Company's documents, or nil; DocErr says why not.
	Docs   *discovery.Company
	DocErr error
}

// FindCompany reads the domain's documents through docs and, when they
// cannot be used, finds the Company in what st (the person's view) holds.
func FindCompany(ctx context.Context, docs *discovery.Client, st *store.Store, domain string) (*Company, error) {
	host, err := discovery.NormalizeDomain(domain)
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	c := &Company{Domain: host}
	co, err := docs.Discover(ctx, host, true)
	if err == nil {
		err = co.Err()
	}
	if err == nil && (co.Document.Auth == nil || co.Metadata == nil) {
		err = errors.New(host + " offers no sign-in server (auth)")
	}
	if err == nil {
		// Poppy 0.1 §3.2: the issuer's metadata was checked against poppy.json.
		c.Docs, c.Issuer = co, co.Document.Auth.Issuer
		c.Auth = auth.Company{Issuer: c.Issuer, Domain: co.Document.Organization.Domain,
			TokenEndpoint: co.Metadata.TokenEndpoint, RevocationEndpoint: co.Metadata.RevocationEndpoint}
		c.Domains = slices.Clone(co.Metadata.PoppyDomains)
	} else {
		c.DocErr = err
		if c.Issuer, err = recordedIssuer(ctx, st, host); err != nil {
			return nil, err
		}
		c.Auth = auth.Company{Issuer: c.Issuer, Domain: host}
	}
	recorded, err := RecordedDomains(ctx, st, c.Issuer)
	if err != nil {
		return nil, err
	}
	c.Domains = sortedUnion(c.Domains, recorded, []string{host})
	return c, nil
}

// recordedIssuer is the issuer of the Company whose Sessions or
// conversations the state recorded at host, or "" when none.
func recordedIssuer(ctx context.Context, st *store.Store, host string) (string, error) {
	issuers, err := st.Issuers(ctx)
	if err != nil {
		return "", err
	}
	for _, iss := range issuers {
		domains, err := RecordedDomains(ctx, st, iss)
		if err != nil {
			return "", err
		}
		if slices.Contains(domains, host) {
			return iss, nil
		}
	}
	return "", nil
}

// RecordedDomains are the domains st recorded Sessions and conversations
// at, for the Company issuer, sorted.
func RecordedDomains(ctx context.Context, st *store.Store, issuer string) ([]string, error) {
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

// Covered is the Company's domains, the one given first.
func (c *Company) Covered() []string {
	out := []string{c.Domain}
	for _, d := range c.Domains {
		if d != c.Domain {
			out = append(out, d)
		}
	}
	return out
}
