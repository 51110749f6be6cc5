// Package untrusted makes text a Company sent safe to put in an error, a log
// line or a tool result: no control characters (no forged log lines, no
// terminal escapes), valid UTF-8, and a bounded length. The words stay the
// Company's: callers still mark them as third-party content.
package untrusted

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text turns control characters into spaces, drops invalid UTF-8 and U+FFFD,
// and cuts s to at most max bytes on a rune boundary, ending a cut with "…".
func Text(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == unicode.ReplacementChar:
			return -1
		case unicode.IsControl(r):
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Code reports whether s can be an OAuth-style error code: 1 to 64 printable
// ASCII characters without a quote or a backslash (RFC 6749 §5.2: error
// values are %x20-21 / %x23-5B / %x5D-7E).
func Code(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
