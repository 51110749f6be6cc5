package netguard

import (
	"net"
	"net/netip"
	"testing"
)

// TestPublic pins the policy: the first and last address of every range
// that is not public, its IPv4-mapped, NAT64 and 6to4 forms, and public
// neighbours on either side, which must stay reachable.
func TestPublic(t *testing.T) {
	refused := []string{
		// 0.0.0.0/8, loopback, RFC 1918, CGNAT, link-local (cloud metadata).
		"0.0.0.0", "0.255.255.255", "127.0.0.1", "127.255.255.254", "10.0.0.0", "10.255.255.255",
		"172.16.0.0", "172.31.255.255", "192.168.0.0", "192.168.255.255", "100.64.0.0", "100.127.255.255",
		"169.254.0.0", "169.254.169.254", "169.254.255.255",
		// Special-purpose IPv4: protocol assignments, documentation, 6to4 relay, benchmarking.
		"192.0.0.0", "192.0.0.170", "192.0.2.1", "198.51.100.7", "203.0.113.255", "192.88.99.1",
		"198.18.0.0", "198.19.255.255",
		// Multicast, reserved, broadcast.
		"224.0.0.1", "239.255.255.255", "240.0.0.0", "255.255.255.255",
		// IPv6: unspecified, loopback, IPv4-compatible, discard, ULA, link-local, site-local, multicast.
		"::", "::1", "::7f00:1", "::a9fe:a9fe", "100::1", "fc00::", "fd12:3456::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"fe80::", "fe80::1", "febf:ffff::1", "fec0::1", "ff02::1", "ff0e::1",
		// IPv4-mapped forms of what is refused.
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:0.0.0.0", "::ffff:100.64.0.1",
		// NAT64 (RFC 6052) and 6to4 (RFC 3056) forms of what is refused, and local-use NAT64.
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101", "64:ff9b:1::1",
		"2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:0a00:0001::",
		// Special-purpose ranges inside 2000::/3: Teredo and protocol assignments, documentation.
		"2001::1", "2001:0:4136:e378::1", "2001:1ff:ffff::1", "2001:db8::1", "2001:db8:ffff::", "3fff::1", "3fff:fff::1",
		// Zones do not change the verdict.
		"fe80::1%eth0",
	}
	for _, s := range refused {
		ip := netip.MustParseAddr(s)
		if Public(ip) {
			t.Errorf("%s is public, want refused", s)
		}
		if reason(ip) == "" {
			t.Errorf("%s has no reason", s)
		}
	}
	public := []string{
		"1.1.1.1", "8.8.8.8", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
		"128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0", "192.0.1.0", "192.167.255.255",
		"192.169.0.0", "198.17.255.255", "198.20.0.0", "223.255.255.255", "93.184.215.14",
		"::ffff:93.184.215.14", "64:ff9b::808:808", "2002:808:808::1", "2001:4860:4860::8888", "2606:4700::1111",
		"2001:200::1", "2a00:1450:4001::200e", "3fff:1000::1",
	}
	for _, s := range public {
		if ip := netip.MustParseAddr(s); !Public(ip) {
			t.Errorf("%s refused (%s), want public", s, reason(ip))
		}
	}
	if Public(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

// TestLiteralTricks: forms some parsers read as an IP (decimal, octal, hex,
// short) are not IP literals to Go. They can only reach the dialer as names
// to resolve, and the dialer checks the address they resolve to.
func TestLiteralTricks(t *testing.T) {
	for _, s := range []string{
		"2130706433", "0177.0.0.1", "0x7f.0.0.1", "0x7f000001", "127.1", "127.0.1", "017700000001",
		"169.254.169.254.", "0251.0376.0251.0376", "1.2.3.04", "::ffff:0177.0.0.1",
	} {
		if _, err := netip.ParseAddr(s); err == nil {
			t.Errorf("netip.ParseAddr(%q) accepted it", s)
		}
		if ip := net.ParseIP(s); ip != nil {
			t.Errorf("net.ParseIP(%q) = %v", s, ip)
		}
	}
}
