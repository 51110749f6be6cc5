// Package untrusted makes text a Company sent safe to put in an error, a log
// line or a tool result: no control characters (no forged log lines, no
// terminal escapes), valid UTF-8, a bounded length, and nothing hidden from
// the reader. Quote also marks the words as the Company's and keeps them on
// one line, for poppy-mcp's own sentences.
//
// Hidden are the code points Unicode says are not shown
// (Default_Ignorable_Code_Point, derived from the unicode package's tables
// as UAX #44 derives it) and the blank fillers: bidirectional marks,
// embeddings, overrides and isolates (a "Trojan Source" reorders what the
// reader sees), zero-width spaces and joiners, invisible operators, Unicode
// tag characters (they spell ASCII no one sees: instructions for a model),
// variation selectors (16 or 256 values behind each letter: bytes smuggled
// to a model). They stay only in the emoji sequences of UTS #51 (a
// presentation selector after an emoji that has one, ZWJ between
// pictographs, the tags of a subdivision flag) and as the joiners that
// shape a script (RFC 5892 Appendix A). Text and Display, for words a
// model reads, remove them; Escape, for bodies whose values a model may
// send back, shows them as escapes instead, so that nothing hides and
// nothing changes meaning. See docs/tools.md "Company text".
//
//go:generate go run gen_tables.go /usr/share/unicode
package untrusted

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text is s for one line of a log, an error or a short field: control
// characters become spaces, hidden characters are removed, invalid UTF-8
// and U+FFFD are dropped, and s is cut to at most max bytes on a rune
// boundary, a cut ending with "…".
func Text(s string, max int) string {
	return shorten(s, false, max)
}

// Display is s for words a model reads at length (a message, a
// description): as Text, but line breaks and tabs stay (CR LF, CR, U+2028
// and U+2029 become LF), and max <= 0 means no cut.
func Display(s string, max int) string {
	if max <= 0 {
		return clean(s, true)
	}
	return shorten(s, true, max)
}

// Quote is s, text a Company wrote, as poppy-mcp's own words quote it:
// cleaned as Display cleans it and cut to max bytes (max <= 0: no cut),
// in double quotes with quotes, backslashes, line breaks and tabs escaped
// (so that no line of it can pass as a line of poppy-mcp's), and marked as
// the Company's: Company text "…".
func Quote(s string, max int) string {
	var b strings.Builder
	b.WriteString(`Company text "`)
	for _, r := range Display(s, max) {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// shorten cleans s and cuts it to at most max bytes. It reads only a
// prefix of s, a few times max long: an error page of megabytes is cut at
// once, and a Company that pads its text with hidden characters only gets
// it cut sooner.
func shorten(s string, lines bool, max int) string {
	limit := 4*max + 64
	if len(s) <= limit {
		return cut(clean(s, lines), lines, max)
	}
	c := clean(s[:limit], lines) // a rune cut in two is invalid UTF-8: dropped
	if len(c) > max {
		return cut(c, lines, max)
	}
	return clean(c+"…", lines) // cut all the same: say so
}

// clean removes hidden characters and drops invalid UTF-8 and U+FFFD;
// other control characters become spaces, but for LF and tab (and CR,
// U+2028, U+2029, made LF) when lines is set.
func clean(s string, lines bool) string {
	if plain(s) {
		return s
	}
	rs := []rune(strings.ToValidUTF8(s, ""))
	hidden := classify(rs, false)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch {
		case hidden[i] || r == unicode.ReplacementChar:
		case lines && r == '\r':
			if i+1 >= len(rs) || rs[i+1] != '\n' {
				b.WriteByte('\n')
			}
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case lines && (r == '\u2028' || r == '\u2029'):
			b.WriteByte('\n')
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cut cuts the clean s to at most max bytes on a rune boundary, ending a
// cut with "…", and cleans what the cut left (a joiner that joins nothing
// now).
func cut(s string, lines bool, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return clean(s[:n]+"…", lines)
}

// Escape is s for a body whose values a model may read and send back (an
// API's answer, a tool's result): hidden characters and control characters
// other than tab, LF and CR are written as JSON escapes (U+202E as
// `\u202E`, a supplementary character as its surrogate pair), so they show
// and a JSON body means the same; invalid UTF-8 becomes U+FFFD, as a JSON
// encoder would make it. Nothing is removed.
func Escape(s string) string {
	if plain(s) {
		return s
	}
	rs := []rune(strings.ToValidUTF8(s, "\uFFFD"))
	hidden := classify(rs, true)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		if hidden[i] || escaped(r) {
			writeEscape(&b, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// escaped reports whether Escape writes r, a character it does not hide,
// as an escape: a control character but tab, LF and CR.
func escaped(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// hexDigits are the digits of an escape. Its last is that of r&0xF, for a
// surrogate pair too.
const hexDigits = "0123456789ABCDEF"

// writeEscape writes r as JSON writes it escaped.
func writeEscape(b *strings.Builder, r rune) {
	unit := func(u rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hexDigits[u>>shift&0xF])
		}
	}
	if r <= 0xFFFF {
		unit(r)
		return
	}
	r -= 0x10000
	unit(0xD800 + r>>10)
	unit(0xDC00 + r&0x3FF)
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

// EscapeValues is a JSON value (a message's data, say) with the hidden and
// control characters of its strings and keys written as escapes inside
// them: once the JSON is decoded, as a client does, they still show as
// `\u202E`. A value that hides nothing is returned byte for byte; one that
// is not valid JSON is Escape'd. Unlike Escape, this changes the strings
// that hid something: a character cannot both show after decoding and
// stay.
func EscapeValues(raw []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return []byte(Escape(string(raw)))
	}
	changed := false
	v = escapeStrings(v, &changed)
	if !changed {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(Escape(string(raw)))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// escapeStrings applies Escape to the strings and keys of a decoded JSON
// value, and sets changed when that changed any.
func escapeStrings(v any, changed *bool) any {
	esc := func(s string) string {
		e := Escape(s)
		*changed = *changed || e != s
		return e
	}
	switch v := v.(type) {
	case string:
		return esc(v)
	case []any:
		for i := range v {
			v[i] = escapeStrings(v[i], changed)
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[esc(k)] = escapeStrings(e, changed)
		}
		return out
	}
	return v
}
