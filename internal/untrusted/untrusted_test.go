package untrusted

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"two\nlines\r\x1b[31m", 40, "two lines  [31m"},
		{"bad \xff utf8 \uFFFD", 40, "bad  utf8 "},
		{strings.Repeat("é", 10), 9, "éééé…"}, // 2-byte runes: cut on a rune boundary
		{"exactly ten bytes", 10, "exactly te…"},
	}
	for _, c := range cases {
		if got := Text(c.in, c.max); got != c.want {
			t.Errorf("Text(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestCode(t *testing.T) {
	for _, ok := range []string{"invalid_grant", "use_dpop_nonce", "a"} {
		if !Code(ok) {
			t.Errorf("Code(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", `a"b`, `a\b`, "a\nb", "é", strings.Repeat("x", 65)} {
		if Code(bad) {
			t.Errorf("Code(%q) = true", bad)
		}
	}
}

func FuzzText(f *testing.F) {
	f.Add("hello\n\x1b", 5)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got := Text(s, max)
		if !utf8.ValidString(got) || len(got) > max+len("…") || strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("Text(%q, %d) = %q", s, max, got)
		}
	})
}
