// Package netguard keeps Company-supplied URLs away from the machine's own
// network: every connection poppy-mcp opens for a Company (discovery and
// OpenAPI documents, API calls, conversations, token requests, relayed MCP
// servers, the browser's pages) is refused at dial time when the address
// actually connected to is not a public unicast address (loopback, RFC 1918,
// link-local and cloud metadata, CGNAT, unique local, multicast, reserved,
// documentation, and every IPv6 form that embeds one of those).
//
// The check runs on the IP address the connection goes to, after DNS, in
// net.Dialer's Control hook, so a name that resolves to a public address
// when checked and to a private one when connected (DNS rebinding) gains
// nothing. Names mapped explicitly (Options.Resolve, the --resolve flag)
// reach the address they are mapped to: that is the escape hatch for
// development and tests.
//
// Errors say only that an address is not public, or that a connection could
// not be made: never whether a port was closed, filtered or open.
package netguard

// This file is the address policy: which IP addresses are public.

import "net/netip"

// rangeOf is one range of addresses that are not public, with the reason.
type rangeOf struct {
	prefix netip.Prefix
	why    string
}

func ranges(why string, prefixes ...string) []rangeOf {
	out := make([]rangeOf, len(prefixes))
	for i, p := range prefixes {
		out[i] = rangeOf{netip.MustParsePrefix(p), why}
	}
	return out
}

// notPublic4 are the IPv4 ranges that are not public unicast (RFC 6890's
// special-purpose registry, with RFC 1918 and RFC 6598).
var notPublic4 = concat(
	ranges("this network (RFC 791)", "0.0.0.0/8"),
	ranges("private (RFC 1918)", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
	ranges("shared address space, carrier-grade NAT (RFC 6598)", "100.64.0.0/10"),
	ranges("loopback (RFC 1122)", "127.0.0.0/8"),
	ranges("link-local, where cloud metadata services live (RFC 3927)", "169.254.0.0/16"),
	ranges("IETF protocol assignments (RFC 6890)", "192.0.0.0/24"),
	ranges("documentation (RFC 5737)", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"),
	ranges("6to4 relay anycast (RFC 7526)", "192.88.99.0/24"),
	ranges("benchmarking (RFC 2544)", "198.18.0.0/15"),
	ranges("multicast (RFC 5771)", "224.0.0.0/4"),
	ranges("reserved, and the limited broadcast address (RFC 1112, RFC 919)", "240.0.0.0/4"),
)

// globalUnicast6 is the only IPv6 space handed out for public use (RFC
// 4291 §2.4): everything outside it (unspecified, loopback, IPv4-compatible,
// discard, unique local fc00::/7, link-local fe80::/10, site-local,
// multicast ff00::/8) is not public, except the forms that embed an IPv4
// address, which are judged by that address.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// notPublic6 are the special-purpose ranges inside 2000::/3.
var notPublic6 = concat(
	ranges("IETF protocol assignments, Teredo included (RFC 2928, RFC 4380)", "2001::/23"),
	ranges("documentation (RFC 3849, RFC 9637)", "2001:db8::/32", "3fff::/20"),
)

// Prefixes of IPv6 forms that carry an IPv4 address, judged by that address.
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 §2.1: the IPv4 address in the last 32 bits
	sixTo4 = netip.MustParsePrefix("2002::/16")    // RFC 3056 §2: the IPv4 address in bits 16 to 47
)

func concat(rs ...[]rangeOf) []rangeOf {
	var out []rangeOf
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

// Public reports whether ip is a public unicast address that a Company URL
// may reach. IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4
// (2002:AABB:CCDD::) addresses are judged by the IPv4 address they carry.
func Public(ip netip.Addr) bool { return reason(ip) == "" }

// reason says why ip is not public, or "" when it is.
func reason(ip netip.Addr) string {
	ip = ip.WithZone("")
	switch {
	case !ip.IsValid():
		return "not an IP address"
	case ip.Is4In6():
		return reason(ip.Unmap())
	case ip.Is4():
		for _, r := range notPublic4 {
			if r.prefix.Contains(ip) {
				return r.why
			}
		}
		return ""
	case nat64.Contains(ip):
		b := ip.As16()
		return embedded(netip.AddrFrom4([4]byte(b[12:16])), "NAT64")
	case sixTo4.Contains(ip):
		b := ip.As16()
		return embedded(netip.AddrFrom4([4]byte(b[2:6])), "6to4")
	case !globalUnicast6.Contains(ip):
		return "not IPv6 global unicast: loopback, unspecified, unique local, link-local, multicast or reserved (RFC 4291)"
	}
	for _, r := range notPublic6 {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	return ""
}

// embedded judges an IPv6 form by the IPv4 address it carries.
func embedded(v4 netip.Addr, form string) string {
	if why := reason(v4); why != "" {
		return form + " form of an address that is " + why
	}
	return ""
}
