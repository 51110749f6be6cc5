package tools

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/browser"
)

// prefixRule is what openapi2tools takes as a prefix: valid in a tool name,
// leaving room for the tool's own name.
var prefixRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// testKinds are the kinds a prefix can have, up to a tenth API.
var testKinds = []struct {
	kind string
	n    int
}{{kindAPI, 1}, {kindAPI, 2}, {kindAPI, 10}, {kindMCP, 1}, {kindMCP, 2}, {kindMCP, 10}}

// TestDomainLabel: names that were plain stay exactly as they were; a
// domain with a kind among its later labels (the prefix attack), a port
// lookalike, an IP address, a reserved or a long label gets a hashed one.
func TestDomainLabel(t *testing.T) {
	t.Parallel()
	hashed := regexp.MustCompile(`^[a-z0-9-]{1,8}__[a-z2-7]{13}$`)
	for in, want := range map[string]string{
		"example.com":            "example_com",
		"www.Example.com.":       "example_com",
		"localhost:8443":         "localhost_8443",
		"shop.example.co.uk":     "shop_example_co_uk",
		"outdoor-gear.co":        "outdoor-gear_co",
		"api.example.com":        "api_example_com", // a kind first is no one's prefix
		"shop.io":                "shop_io",
		"call":                   "call", // call_api_ begins no built-in name (call_api is whole)
		"shop.io.mcp.ax":         "",
		"shop.io.api2.ax":        "",
		"localhost.8443":         "",
		"127.0.0.1":              "",
		"[::1]:8443":             "",
		"list":                   "",
		"outdoor-gear-store.com": "",
	} {
		got := domainLabel(in)
		if want == "" && !hashed.MatchString(got) || want != "" && got != want {
			t.Errorf("domainLabel(%q) = %q, want %q", in, got, cmpOr(want, "a hashed label"))
		}
	}
	if a, b := domainLabel("outdoor-gear-store.com"), domainLabel("outdoor-gear-st7286.example.net"); a == b || !strings.HasPrefix(a, "outdoor-__") {
		t.Errorf("long labels %q and %q: want distinct, each with its first 8 characters", a, b)
	}
	// A hashed label is as stable as a plain one: README shows this one.
	if got := domainLabel("shop.io.mcp.ax"); got != "shop__h5minbw2ptnwo" {
		t.Errorf("domainLabel(shop.io.mcp.ax) = %q, not the label README and earlier runs gave it", got)
	}
	if got := APIToolPrefix("example.com"); got != "example_com_api_" {
		t.Errorf("APIToolPrefix(example.com) = %q", got)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestToolPrefixesInjective is the property of names.go over domains built
// from parts chosen to meet (kinds, ports, numbers, www, reserved words,
// characters no DNS label has): for two domains that differ, no prefix of
// one equals or begins a prefix of the other, none begins a built-in
// tool's name, and each is a valid prefix. Sorting the prefixes makes it
// linear: a prefix that begins others begins the one after it.
func TestToolPrefixesInjective(t *testing.T) {
	t.Parallel()
	builtins := builtinNames(t)
	parts := []string{"shop", "io", "mcp", "api", "api2", "mcp10", "api0", "api01", "www", "example", "com", "co", "uk",
		"list", "describe", "call", "8443", "1", "a-b", "xn--bcher-kva", "outdoor-gear-store", "_", "ä", "", "[::1]", "WWW"}
	r := rand.New(rand.NewPCG(1, 2))
	type owned struct{ prefix, key string }
	var all []owned
	seen := map[string]bool{}
	for range 5000 {
		n := 1 + r.IntN(4)
		labels := make([]string, n)
		for i := range labels {
			labels[i] = parts[r.IntN(len(parts))]
		}
		d := strings.Join(labels, ".")
		if r.IntN(4) == 0 {
			d += ":" + []string{"8443", "443", "08443", "", "x"}[r.IntN(5)]
		}
		key := nameKey(d)
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, k := range testKinds {
			p := toolPrefix(d, k.kind, k.n)
			if !prefixRule.MatchString(p) {
				t.Errorf("prefix %q of %q is not a valid prefix", p, d)
			}
			if b := beginsBuiltin(p, builtins); b != "" {
				t.Errorf("prefix %q of %q begins the built-in tool %s", p, d, b)
			}
			all = append(all, owned{p, key + " " + k.kind + fmt.Sprint(k.n)})
		}
	}
	slices.SortFunc(all, func(a, b owned) int { return strings.Compare(a.prefix, b.prefix) })
	for i := 1; i < len(all); i++ {
		if strings.HasPrefix(all[i].prefix, all[i-1].prefix) {
			t.Errorf("prefix %q (%s) begins %q (%s)", all[i-1].prefix, all[i-1].key, all[i].prefix, all[i].key)
		}
	}
	if len(seen) < 1000 {
		t.Fatalf("only %d domains: the property was tried on too few", len(seen))
	}
}

// FuzzToolPrefixes: for any two domains that differ as names, no prefix of
// one equals or begins a prefix of the other or a built-in tool's name.
// The seeds are the attacks that found the old labels' collisions.
func FuzzToolPrefixes(f *testing.F) {
	for _, seed := range [][2]string{
		{"shop.io", "shop.io.mcp.ax"}, {"shop.io", "shop.io.api.ax"}, {"localhost:8443", "localhost.8443"},
		{"[::1]", "1"}, {"2001:db8::1", "2001.db8.1"}, {"ab", "ab.api.cdefghij-long.com"},
		{"list", "describe"}, {"bücher.example", "b.cher.example"},
		{"outdoor-gear-store.com", "outdoor-gear-st7286.example.net"},
	} {
		f.Add(seed[0], seed[1])
	}
	builtins := builtinNames(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		if nameKey(a) == nameKey(b) {
			return
		}
		for _, ka := range testKinds {
			pa := toolPrefix(a, ka.kind, ka.n)
			if !prefixRule.MatchString(pa) || beginsBuiltin(pa, builtins) != "" {
				t.Fatalf("prefix %q of %q: invalid or begins a built-in name", pa, a)
			}
			for _, kb := range testKinds {
				if pb := toolPrefix(b, kb.kind, kb.n); strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa) {
					t.Fatalf("prefixes %q of %q and %q of %q meet", pa, a, pb, b)
				}
			}
		}
	})
}

// TestReservedLabels: a built-in tool's name begins with a label and a kind
// only where no domain can have that label, whichever tools are built in
// (browse_page only with a browser), so a Company's tool never takes one.
func TestReservedLabels(t *testing.T) {
	t.Parallel()
	for _, name := range builtinNames(t) {
		if strings.Contains(name, "__") {
			t.Errorf("built-in tool %s has an empty part, as hashed labels do", name)
		}
		parts := strings.Split(name, "_")
		for i := 1; i < len(parts)-1; i++ { // label_kind_ begins name only with more after the kind
			if !kindRule.MatchString(parts[i]) {
				continue
			}
			label := strings.Join(parts[:i], "_")
			if domainLabel(strings.Join(parts[:i], ".")) == label {
				t.Errorf("the domain %s has the label %s, so its %s tools could take %s: add it to reservedLabel",
					strings.Join(parts[:i], "."), label, parts[i], name)
			}
		}
	}
}

// builtinNames are the names of every tool poppy-mcp registers itself.
func builtinNames(tb testing.TB) []string {
	tb.Helper()
	s := New(nil, &Options{Browser: &browser.Browser{}})
	tb.Cleanup(s.Close)
	if !slices.Contains(s.names.builtins, "browse_page") || !slices.Contains(s.names.builtins, "list_api_operations") {
		tb.Fatalf("built-in tools %v: browse_page or list_api_operations missing", s.names.builtins)
	}
	return s.names.builtins
}

func beginsBuiltin(p string, builtins []string) string {
	for _, b := range builtins {
		if strings.HasPrefix(b, p) {
			return b
		}
	}
	return ""
}

// TestClaimPrefixes: a prefix that begins, or is begun by, another issuer's
// prefix, or that begins a built-in tool's name, is refused, all or none;
// the same issuer may claim again.
func TestClaimPrefixes(t *testing.T) {
	t.Parallel()
	s := New(nil, nil)
	defer s.Close()
	const a, b = "https://auth.example.com", "https://auth.other.example"
	if err := s.names.claim(a, "example_com_api_", "example_com_mcp_"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		issuer string
		claim  []string
		ok     bool
	}{
		{a, []string{"example_com_api_", "example_com_api2_"}, true},
		{b, []string{"example_com_api_"}, false},
		{b, []string{"example_com_api_x_"}, false},
		{b, []string{"example_com_"}, false},
		{b, []string{"example_com_api2_"}, false}, // a's now
		{b, []string{"list_api_"}, false},         // list_api_operations
		{b, []string{"call_api_"}, true},          // call_api is a whole name: call_api_x is not it
		{b, []string{"example_co_api_", "example_com_mcp_"}, false},
		{b, []string{"example_co_api_"}, true}, // the refusal above recorded nothing
		{a, []string{"example_co_api_x_"}, false},
	} {
		err := s.names.claim(tc.issuer, tc.claim...)
		if (err == nil) != tc.ok {
			t.Errorf("claim %v for %s: %v, want ok %v", tc.claim, tc.issuer, err, tc.ok)
		}
	}
}
