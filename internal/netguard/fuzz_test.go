package netguard

import (
	"net/netip"
	"testing"
)

// FuzzPublic checks the classifier against the standard library's own
// classes and against itself: no address the standard library calls
// loopback, private, link-local, multicast or unspecified is public, and an
// IPv4 address gets the same verdict in its IPv4-mapped, NAT64 and 6to4
// forms and after a round trip through its text form.
func FuzzPublic(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "169.254.169.254", "8.8.8.8", "::1", "fe80::1", "2606:4700::1111",
		"::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::", "fd00::1", "ff02::1", "100.64.0.1"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		public := Public(ip)
		if public && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
			ip.IsMulticast() || ip.IsUnspecified() || !ip.Unmap().IsGlobalUnicast()) {
			t.Fatalf("%s is public, but the standard library says it is not global unicast", ip)
		}
		if public != (reason(ip) == "") {
			t.Fatalf("%s: Public %v but reason %q", ip, public, reason(ip))
		}
		if again := netip.MustParseAddr(ip.String()); Public(again) != public {
			t.Fatalf("%s: verdict changed after its text form", ip)
		}
		if !ip.Is4() {
			return
		}
		v4 := ip.As4()
		forms := map[string]netip.Addr{
			"mapped": netip.AddrFrom16(netip.AddrFrom4(v4).As16()),
			"NAT64":  netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),
			"6to4":   netip.AddrFrom16([16]byte{0x20, 0x02, v4[0], v4[1], v4[2], v4[3], 15: 1}),
		}
		for name, a := range forms {
			if Public(a) != public {
				t.Fatalf("%s is public=%v, but its %s form %s is public=%v", ip, public, name, a, Public(a))
			}
		}
	})
}
