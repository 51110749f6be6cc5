package tools

// This file names the tools a Company brings: the operations of its OpenAPI
// APIs and the tools of its MCP servers appear under a prefix made of a label
// of its domain and the API's kind, "api" or "mcp", with a number from the
// second API of a kind on: example.com's are example_com_api_,
// example_com_api2_, ..., example_com_mcp_, ... Each of a Company's domains
// has its own label (Poppy 0.1 §3.2: one issuer may have several domains,
// each with its own APIs).
//
// Why two domains' names never meet, whatever the order they are found in
// and across restarts. Split a name at each "_" into parts (two "_" in a row
// make an empty part). A prefix is the label's parts, then the kind, then
// an empty part. A tool's name is its prefix and the tool's own name, which
// the Company picks, so the names of two domains can be equal only if one
// prefix begins the other or they are equal, and a Company's tool can take
// a built-in tool's name only if its prefix begins that name. Prefix P
// begins Q (and is not Q) only if P's label, then P's kind, are the first
// parts of Q: Q's label has a kind as its part i >= 1, and P's label is its
// first i parts. Labels are chosen so that this cannot happen:
//
//   - A plain label is the domain's DNS labels, then its port, joined by "_"
//     (shop.example.co.uk: shop_example_co_uk). It is used only when every
//     DNS label is made of [a-z0-9-], the last is not all digits (so a last
//     part of digits is the port), no part after the first is a kind, it has
//     at most maxPlainLabel characters, and it is not a reserved label (one
//     that begins a built-in tool's name with a kind: list_api_operations).
//     Its parts give the domain back, so two domains have two plain labels.
//   - Any other domain gets a hashed label: its first DNS label cut to
//     stemLength characters, "__", and 65 bits of the SHA-256 of the domain
//     (hashDigits base32 digits). It has an empty part, which no plain label
//     has; its only part after the first that may look like a kind comes
//     right after that empty part, and no label ends with "_" (the first
//     parts up to there); and two hashed labels are equal only if 65 bits of
//     SHA-256 are: taking another Company's label costs about 2^65 hashes.
//
// A label depends on its domain alone, so it is the same on every run.

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// The kinds of API in a tool-name prefix.
const (
	kindAPI = "api"
	kindMCP = "mcp"
)

const (
	// maxPlainLabel is the longest plain label: with "_api_" and a tool
	// name, it leaves most of MCP's 64 characters to the tool.
	maxPlainLabel = 20
	// stemLength is how much of the first DNS label a hashed label keeps.
	stemLength = 8
	// hashDigits is how many base32 digits of the domain's SHA-256 a hashed
	// label has: 65 bits.
	hashDigits = 13
)

var (
	// kindRule matches a kind as toolPrefix writes it: api or mcp, alone or
	// with a number from 2, without a leading zero.
	kindRule = regexp.MustCompile(`^(api|mcp)([2-9]|[1-9][0-9]+)?$`)
	// dnsLabelRule is one DNS label of a host name, as discovery accepts it.
	dnsLabelRule = regexp.MustCompile(`^[a-z0-9-]+$`)
	// portRule is a port.
	portRule = regexp.MustCompile(`^[0-9]{1,5}$`)
)

// reservedLabel reports whether a plain label would begin built-in tools'
// names with a kind after it (list_api_operations, describe_api_operation):
// a domain with one of these gets a hashed label. TestReservedLabels checks
// the list against every built-in tool.
func reservedLabel(label string) bool {
	switch label {
	case "list", "describe":
		return true
	}
	return false
}

// toolPrefix is the prefix of the tools of a Company's n-th API (from 1) of
// kind at domain, its organization.domain.
func toolPrefix(domain, kind string, n int) string {
	if n > 1 {
		kind += strconv.Itoa(n)
	}
	return domainLabel(domain) + "_" + kind + "_"
}

// orgDomain is the Company's organization.domain, else the domain the User
// typed: a Company's tools have the same names whichever host the User typed.
func orgDomain(co *discovery.Company) string {
	if co.Document != nil && co.Document.Organization != nil && co.Document.Organization.Domain != "" {
		return co.Document.Organization.Domain
	}
	return co.Domain
}

// companyDomain is the domain a Company at domain names its tools after
// (orgDomain): the organization.domain it publishes, which is the host the
// User typed, without the port a development Company is reached at (Poppy
// 0.1 §3.1: it matches "the domain the Personal Agent requested", and
// discovery compares hosts). `poppy-mcp openapi --domain` names with it.
func companyDomain(domain string) string {
	if host, _, err := net.SplitHostPort(domain); err == nil {
		return host
	}
	return domain
}

// domainLabel is the label of domain in tool names: its plain label when
// it has one, else its hashed label.
func domainLabel(domain string) string {
	key := nameKey(domain)
	if p, ok := plainLabel(key); ok {
		return p
	}
	return hashedLabel(key)
}

// nameKey is the domain that names tools: lower case, without a trailing
// dot or a leading "www." (Poppy 0.1 §3.1: the same domain "ignoring a
// leading www."), with its port if it has one.
func nameKey(domain string) string {
	d := strings.ToLower(domain)
	host, port, err := net.SplitHostPort(d)
	if err != nil {
		host = d
	}
	host = strings.TrimPrefix(strings.TrimSuffix(host, "."), "www.")
	if err != nil {
		return host
	}
	return net.JoinHostPort(host, port)
}

// plainLabel is the plain label of a name key, if it may have one.
func plainLabel(key string) (string, bool) {
	host, port, err := net.SplitHostPort(key)
	switch {
	case err != nil && strings.Contains(key, ":"), err == nil && !portRule.MatchString(port):
		return "", false
	case err != nil:
		host = key
	}
	parts := strings.Split(host, ".")
	for _, p := range parts {
		if !dnsLabelRule.MatchString(p) {
			return "", false
		}
	}
	if strings.Trim(parts[len(parts)-1], "0123456789") == "" {
		return "", false // an IP address, or a number that would read as a port
	}
	if port != "" {
		parts = append(parts, port)
	}
	for _, p := range parts[1:] {
		if kindRule.MatchString(p) {
			return "", false
		}
	}
	label := strings.Join(parts, "_")
	if len(label) > maxPlainLabel || reservedLabel(label) {
		return "", false
	}
	return label, true
}

// hashedLabel is the first DNS label of key (at most stemLength characters,
// "co" when it has none), "__", and 65 bits of key's SHA-256.
func hashedLabel(key string) string {
	stem := key
	if i := strings.IndexFunc(key, func(r rune) bool { return !isLDH(r) }); i >= 0 {
		stem = key[:i]
	}
	stem = stem[:min(len(stem), stemLength)]
	if stem == "" {
		stem = "co"
	}
	sum := sha256.Sum256([]byte(key))
	return stem + "__" + base32.NewEncoding(labelAlphabet).WithPadding(base32.NoPadding).EncodeToString(sum[:9])[:hashDigits]
}

func isLDH(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' }

// labelAlphabet is lower-case base32 (RFC 4648 §6), as tool names take it.
const labelAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// prefixRegistry records which Company, by its issuer (Poppy 0.1 §3.2: "A
// Company is identified by its auth.issuer"), announces tools under each
// prefix. Labels keep different domains apart (see the top of this file);
// the registry keeps a domain's names from moving to another issuer while
// the Server runs, when a domain changes hands. It is safe for concurrent use.
type prefixRegistry struct {
	builtins []string // the names of the Server's own tools; set by New before the Server serves

	// mu guards owners.
	mu     sync.Mutex
	owners prefixOwners
}

// prefixOwners are the issuers of the Companies that own tool-name
// prefixes, by prefix.
type prefixOwners map[string]string

// claim records prefixes as the tool-name prefixes of the Company with
// issuer, all or none. It refuses a prefix that begins a built-in tool's
// name, or that begins, or is begun by, another Company's prefix: only
// then could a Company's tool replace another's (mcp-go's AddTools
// replaces a tool of the same name) and receive the user's calls. A
// Company keeps its prefixes for the Server's life.
func (r *prefixRegistry) claim(issuer string, prefixes ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range prefixes {
		for _, b := range r.builtins {
			if strings.HasPrefix(b, p) {
				return fmt.Errorf("tools: the tool-name prefix %s would take poppy-mcp's tool %s", p, b)
			}
		}
		for q, owner := range r.owners {
			if owner != issuer && (strings.HasPrefix(p, q) || strings.HasPrefix(q, p)) {
				return fmt.Errorf("tools: the tool-name prefix %s is taken by the Company of %s (%s)", p, owner, q)
			}
		}
	}
	for _, p := range prefixes {
		r.owners[p] = issuer
	}
	return nil
}
