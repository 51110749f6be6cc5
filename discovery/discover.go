// Package discovery reads a Company's public documents the way a Personal Agent must
// before using it: poppy.json (Poppy 0.1 §3, §3.1, §3.3), the issuer's OAuth
// Authorization Server Metadata (§3.2, RFC 8414), and the protected resource
// metadata of each MCP API (§6, RFC 9728).
//
// It checks every rule the agent depends on and reports each finding with the
// section it comes from. A Company with a finding that blocks use is
// unusable: the agent refuses it; an error in what the agent skips (an
// unsupported extension, one MCP API) is reported but blocks nothing.
//
// Its FetchDocument is the one fetcher of every public document, the
// Company's OpenAPI documents included: HTTPS-only redirects, a size cap, a
// deadline of its own, and the 429 holds shared with the rest of the agent.
// The package never signs in and never calls a Company API.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// MaxBodyBytes caps each discovery document; FetchDocument's callers
	// set their own cap. Zero means 1 MiB.
	MaxBodyBytes int64
	// Timeout bounds each document fetch, its body included: a Company
	// cannot hold one open by sending slowly. Zero means 30 s.
	Timeout time.Duration
	// Holds keeps the Retry-After of every 429 per endpoint (Poppy 0.1
	// §4.3). Give auth the same one, so a hold set by a document fetch or
	// by a Session request is honoured by both. Zero: the Client's own.
	Holds *retryafter.Holds
}

// Client discovers Companies and fetches their public documents. It is safe
// for concurrent use.
type Client struct {
	http    *http.Client
	maxBody int64
	timeout time.Duration
	holds   *retryafter.Holds
	now     func() time.Time
}

// New returns a Client that fetches through hc, which should cache (see package
// cache). A nil hc uses http.DefaultClient. Redirects are always limited to
// HTTPS, whatever hc's own policy, and hc's Timeout is replaced by
// Options.Timeout.
func New(hc *http.Client, opts *Options) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	d := &Client{maxBody: o.MaxBodyBytes, timeout: o.Timeout, holds: o.Holds, now: time.Now}
	if d.maxBody <= 0 {
		d.maxBody = 1 << 20
	}
	if d.timeout <= 0 {
		d.timeout = 30 * time.Second
	}
	if d.holds == nil {
		d.holds = &retryafter.Holds{}
	}
	c := *hc
	c.CheckRedirect, c.Timeout = d.checkRedirect, 0
	d.http = &c
	return d
}

// Company is what discovery learned about one Company.
type Company struct {
	// Domain is the host (and port, in development) the User asked for.
	Domain string `json:"domain"`
	// URL is where poppy.json was finally found, after redirects.
	URL string `json:"url,omitempty"`

	Document  *Document                    `json:"document,omitempty"`
	Metadata  *Metadata                    `json:"metadata,omitempty"`
	Resources map[string]*ResourceMetadata `json:"resources,omitempty"` // by MCP API url
	Findings  []Finding                    `json:"findings"`
}

// OK reports whether the Company is usable: no finding blocks use. A
// Company may be usable with error findings about what the agent skips.
func (c *Company) OK() bool { return !blocking(c.Findings) }

// Err returns a *RefusedError listing the findings that block use, or nil.
func (c *Company) Err() error {
	var errs []Finding
	for _, f := range c.Findings {
		if f.BlocksUse {
			errs = append(errs, f)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &RefusedError{Domain: c.Domain, Findings: errs}
}

// Discover fetches and checks a Company's documents. The returned error is
// non-nil only when nothing could be checked (bad input, DNS, TLS, timeouts,
// server errors): a Company that breaks rules comes back with findings; use
// Company.Err to refuse it. An MCP API whose metadata cannot be fetched is
// only a warning: it is left out of Resources, and the rest is usable. With
// refresh, cached documents are revalidated.
func (c *Client) Discover(ctx context.Context, domain string, refresh bool) (*Company, error) {
	host, err := NormalizeDomain(domain)
	if err != nil {
		return nil, err
	}
	co := &Company{Domain: host}
	// Poppy 0.1 §3: "https://{domain}/.well-known/poppy.json over HTTPS".
	doc, err := c.document(ctx, co, "https://"+host+"/.well-known/poppy.json", refresh)
	if err != nil || doc == nil {
		return co, err
	}
	co.Document = doc
	co.Findings = append(co.Findings, CheckDocument(doc, host)...)
	if doc.Auth == nil || !isHTTPSURL(doc.Auth.Issuer) {
		return co, nil
	}
	if err := c.metadata(ctx, co, refresh); err != nil {
		return co, err
	}
	return co, c.resources(ctx, co, refresh)
}

// document fetches and parses poppy.json.
func (c *Client) document(ctx context.Context, co *Company, u string, refresh bool) (*Document, error) {
	got, fs, err := c.fetchJSON(ctx, u, "3", refresh)
	co.Findings = append(co.Findings, fs...)
	if err != nil || got == nil {
		return nil, err
	}
	co.URL = got.url
	doc, fs := ParseDocument(got.body)
	co.Findings = append(co.Findings, fs...)
	return doc, nil
}

func (c *Client) metadata(ctx context.Context, co *Company, refresh bool) error {
	u, err := MetadataURL(co.Document.Auth.Issuer)
	if err != nil {
		return err
	}
	got, fs, err := c.fetchJSON(ctx, u, "3.2", refresh)
	co.Findings = append(co.Findings, fs...)
	if err != nil || got == nil {
		return err
	}
	md, fs := ParseMetadata(got.body)
	co.Findings = append(co.Findings, fs...)
	if md != nil {
		co.Metadata = md
		co.Findings = append(co.Findings, CheckMetadata(md, co.Document)...)
	}
	return nil
}

// maxMCPAPIs bounds how many MCP APIs' metadata one discovery fetches.
const maxMCPAPIs = 16

// resources fetches the protected resource metadata of every MCP API, up to
// maxMCPAPIs. One that cannot be fetched (DNS, TLS, 5xx, 429, a 4xx, a page
// that is not JSON) makes that MCP API unusable, with a warning, and leaves
// the rest of the Company usable: an agent relays an MCP API only with its
// metadata. Metadata that breaks §6 is an error finding, but it too makes
// only that MCP API unusable; Resources holds only metadata that passed.
// The error is the context's, when it ends.
func (c *Client) resources(ctx context.Context, co *Company, refresh bool) error {
	n := 0
	for _, api := range co.Document.APIs {
		if api.Type != "mcp" {
			continue
		}
		u, err := ResourceMetadataURL(api.URL)
		if err != nil {
			continue // already reported by CheckDocument
		}
		if n++; n > maxMCPAPIs {
			co.Findings = append(co.Findings, Finding{Severity: Warning, Section: "6",
				Message: fmt.Sprintf("only the first %d MCP APIs are checked: %s is not usable", maxMCPAPIs, api.URL)})
			continue
		}
		got, fs, err := c.fetchJSON(ctx, u, "6", refresh)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || got == nil {
			co.Findings = append(co.Findings, unusableMCP(api.URL, fs, err)...)
			continue
		}
		co.Findings = append(co.Findings, fs...) // warnings: a document read despite its Content-Type
		md, fs := ParseResourceMetadata(got.body)
		if md != nil {
			fs = CheckResourceMetadata(md, api, co.Document.Auth.Issuer)
		}
		if len(fs) > 0 {
			// The Company's error, but only this MCP API is skipped: the rest is usable.
			co.Findings = append(co.Findings, skipped(fs, "the MCP API "+api.URL+" is not usable")...)
			continue
		}
		if co.Resources == nil {
			co.Resources = map[string]*ResourceMetadata{}
		}
		co.Resources[api.URL] = md
	}
	return nil
}

// unusableMCP turns what kept an MCP API's metadata from being fetched (the
// fetch's error, or its findings) into warnings naming the API as unusable.
func unusableMCP(apiURL string, fs []Finding, err error) []Finding {
	var out findings
	if err != nil {
		var fe *FetchError
		if asErr(err, &fe) {
			err = fe.Err // its URL is the metadata's, named below by the API's
		}
		out.warnf("6", "the protected resource metadata of %s could not be fetched (%v): this MCP API is not usable", apiURL, err)
	}
	for _, f := range fs {
		out.warnf(f.Section, "%s: the MCP API %s is not usable", f.Message, apiURL)
	}
	return out
}

// InputError is a domain the User gave that cannot name a Company.
type InputError struct{ Domain, Reason string }

func (e *InputError) Error() string {
	return fmt.Sprintf("discovery: %q is not a domain: %s", e.Domain, e.Reason)
}

// NormalizeDomain turns what a User typed ("Example.com", "https://example.com/",
// "localhost:8443") into host or host:port, lower case. It refuses http URLs,
// paths, user info and empty input.
func NormalizeDomain(in string) (string, error) {
	s := strings.TrimSpace(in)
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "http://"); ok && rest != "" {
		return "", &InputError{in, "Poppy URLs are HTTPS only"}
	}
	if len(s) >= 8 && strings.EqualFold(s[:8], "https://") {
		s = s[8:]
	}
	s = strings.TrimSuffix(s, "/")
	switch {
	case s == "":
		return "", &InputError{in, "it is empty"}
	case strings.ContainsAny(s, "/?#@ \t"):
		return "", &InputError{in, "give only the domain, like example.com"}
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "", &InputError{in, "the port is not a number from 1 to 65535"}
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if port == "" && strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if !validHost(host) {
		return "", &InputError{in, "the host is empty or malformed"}
	}
	if port != "" {
		return net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]", nil
	}
	return host, nil
}

// validHost accepts a DNS name (labels of letters, digits and hyphens) or an IP address.
func validHost(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
