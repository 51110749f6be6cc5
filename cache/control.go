package cache

// This file implements the Cache-Control header field: its parser and the
// request and response directives the Transport obeys. See RFC 9111 §5.2.

import (
	"net/http"
	"sort"
	"strings"
	"time"
)

// maxDeltaSeconds is the value used for a delta-seconds that does not fit.
// RFC 9111 §1.2.2: "If a cache receives a delta-seconds value greater than
// the greatest integer it can represent, or if any of its subsequent
// calculations overflows, the cache MUST consider the value to be
// 2147483648 (2^31) or the greatest positive integer it can conveniently
// represent."
const maxDeltaSeconds = 1 << 31

// cacheControl holds the directives of one or more Cache-Control field lines:
// lower-cased directive names mapped to their unquoted argument ("" when the
// directive has none).
type cacheControl map[string]string

// has reports whether the directive is present.
func (cc cacheControl) has(name string) bool {
	_, ok := cc[name]
	return ok
}

// deltaSeconds returns the delta-seconds argument of a directive such as
// max-age. ok is false when the directive is absent; invalid is true when it
// is present but its argument is not delta-seconds.
func (cc cacheControl) deltaSeconds(name string) (d time.Duration, ok, invalid bool) {
	v, ok := cc[name]
	if !ok {
		return 0, false, false
	}
	d, valid := parseDeltaSeconds(v)
	return d, true, !valid
}

// parseDeltaSeconds parses RFC 9111 §1.2.2 delta-seconds = 1*DIGIT.
func parseDeltaSeconds(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < maxDeltaSeconds {
			n = n*10 + int64(c-'0')
		}
	}
	// RFC 9111 §1.2.2: larger values are taken as 2^31.
	n = min(n, maxDeltaSeconds)
	return time.Duration(n) * time.Second, true
}

// parseCacheControl parses Cache-Control field lines (RFC 9111 §5.2):
//
//	Cache-Control   = #cache-directive
//	cache-directive = token [ "=" ( token / quoted-string ) ]
//
// Directive names are case-insensitive and are returned lower-cased. When a
// directive repeats, the first occurrence wins (RFC 9111 §4.2.1: "either the
// first occurrence should be used or the response should be considered
// stale"). A member that is not a valid directive is skipped up to the next
// comma outside a quoted string. The result is nil when there are no
// directives; reading a nil cacheControl is fine.
func parseCacheControl(lines []string) cacheControl {
	var cc cacheControl // nil until there is a directive
	for _, line := range lines {
		for line != "" {
			var name, value string
			var ok bool
			name, value, ok, line = nextDirective(line)
			if !ok {
				continue
			}
			if cc == nil {
				cc = cacheControl{}
			}
			if _, dup := cc[name]; !dup {
				cc[name] = value
			}
		}
	}
	return cc
}

// nextDirective reads one list member from s and returns the rest after it.
func nextDirective(s string) (name, value string, ok bool, rest string) {
	s = strings.TrimLeft(s, " \t,")
	n := tokenLen(s)
	name, s = strings.ToLower(s[:n]), trimOWS(s[n:])
	ok = n > 0
	if strings.HasPrefix(s, "=") {
		s = trimOWS(s[1:])
		if strings.HasPrefix(s, `"`) {
			var closed bool
			value, s, closed = quotedString(s)
			ok = ok && closed
		} else {
			n = tokenLen(s)
			value, s = s[:n], s[n:]
			ok = ok && n > 0
		}
	}
	s = trimOWS(s)
	if s != "" && s[0] != ',' {
		// Trailing garbage makes the whole member invalid.
		ok = false
	}
	return name, value, ok, skipMember(s)
}

// skipMember drops everything up to and including the next comma that is
// not inside a quoted string.
func skipMember(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return s[i+1:]
		case '"':
			_, rest, _ := quotedString(s[i:])
			return skipMember(rest)
		}
	}
	return ""
}

// quotedString reads an RFC 9110 §5.6.4 quoted-string at the start of s,
// which begins with a double quote, and returns its unescaped content.
func quotedString(s string) (value, rest string, closed bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), "", false
}

// tokenLen returns the length of the RFC 9110 §5.6.2 token at the start of s.
func tokenLen(s string) int {
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return i
		}
	}
	return len(s)
}

// isTchar reports whether c is an RFC 9110 §5.6.2 tchar.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func trimOWS(s string) string { return strings.TrimLeft(s, " \t") }

// String formats the directives as one field value, sorted by name, every
// argument as a quoted-string. Parsing the result gives back cc.
func (cc cacheControl) String() string {
	names := make([]string, 0, len(cc))
	for name := range cc {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		if v := cc[name]; v != "" {
			b.WriteString("=")
			writeQuoted(&b, v)
		}
	}
	return b.String()
}

// writeQuoted writes v as a quoted-string, escaping '"' and '\'.
func writeQuoted(b *strings.Builder, v string) {
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
}

// requestControl returns the cache directives of a request. RFC 9111 §5.4:
// "When the Cache-Control header field is not present in a request, caches
// MUST consider the no-cache request pragma directive as having the same
// effect as if "Cache-Control: no-cache" were present."
func requestControl(h http.Header) cacheControl {
	if lines := h.Values("Cache-Control"); len(lines) > 0 {
		return parseCacheControl(lines)
	}
	if parseCacheControl(h.Values("Pragma")).has("no-cache") {
		return cacheControl{"no-cache": ""}
	}
	return nil // most requests: nothing to allocate
}
