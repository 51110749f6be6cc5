// Package untrusted makes text a Company sent safe to put in an error, a log
// line or a tool result: no control characters (no forged log lines, no
// terminal escapes), valid UTF-8, a bounded length, and nothing hidden from
// the reader. The words stay the Company's: callers still mark them as
// third-party content.
//
// Hidden are the format characters that change how text reads without
// being seen: bidirectional embeddings, overrides and isolates (a
// "Trojan Source" reorders what the reader sees), zero-width spaces and
// joiners that join nothing, invisible operators, Unicode tag characters
// outside an emoji flag (they spell ASCII no one sees: instructions for a
// model), and runs of variation selectors (bytes smuggled behind one
// character). Text and Display, for words a model reads, remove them;
// Escape, for bodies whose values a model may send back, shows them as
// escapes instead, so that nothing hides and nothing changes meaning.
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
	hidden := classify(rs)
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
	hidden := classify(rs)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		if hidden[i] || unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			writeEscape(&b, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeEscape writes r as JSON writes it escaped.
func writeEscape(b *strings.Builder, r rune) {
	const hex = "0123456789ABCDEF"
	unit := func(u rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[u>>shift&0xF])
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

// Characters of emoji sequences (Unicode Technical Standard #51).
const (
	zwnj        = '\u200C' // ZERO WIDTH NON-JOINER
	zwj         = '\u200D' // ZERO WIDTH JOINER
	blackFlag   = '\U0001F3F4'
	cancelTag   = '\U000E007F'
	tagFirst    = '\U000E0000'
	tagLast     = '\U000E007F'
	flagTagLow  = '\U000E0020' // the tag characters of a flag's spec: TAG SPACE ..
	flagTagHigh = '\U000E007E' // .. TAG TILDE
)

// plain reports whether s is valid UTF-8 with nothing that clean or
// Escape would change, or need to look at twice: the common case, read
// once without allocating.
func plain(s string) bool {
	for _, r := range s {
		switch {
		case r < 0x20 || r >= 0x7F && r <= 0xAD, r == '\u180E', r >= '\u200B' && r <= '\u200D',
			r >= '\u2028' && r <= '\u202E', r >= '\u2060' && r <= '\u206F', r == '\u3164',
			r >= '\uFE00' && r <= '\uFE0F', r == '\uFEFF', r >= '\uFFA0' && r <= '\uFFFD',
			r >= tagFirst && r <= '\U000E01EF':
			return false
		}
	}
	return true
}

// classify reports, for each rune, whether it is hidden.
func classify(rs []rune) []bool {
	hidden := make([]bool, len(rs))
	prev := rune(-1) // the last rune kept
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r == blackFlag {
			// UTS #51 §2.8: an emoji tag sequence is a base, tag characters,
			// and a CANCEL TAG: a subdivision flag. Kept whole.
			if end := flagEnd(rs, i); end > i {
				i, prev = end, cancelTag
				continue
			}
		}
		if hidden[i] = hides(r, prev, next(rs, i)); !hidden[i] {
			prev = r
		}
	}
	return hidden
}

// flagEnd returns the index of the CANCEL TAG that ends an emoji tag
// sequence starting at rs[i], or i if there is none.
func flagEnd(rs []rune, i int) int {
	j := i + 1
	for j < len(rs) && rs[j] >= flagTagLow && rs[j] <= flagTagHigh {
		j++
	}
	if j > i+1 && j < len(rs) && rs[j] == cancelTag {
		return j
	}
	return i
}

// next is the rune after rs[i], or -1.
func next(rs []rune, i int) rune {
	if i+1 < len(rs) {
		return rs[i+1]
	}
	return -1
}

// hides reports whether r, after the kept rune prev and before next, is
// hidden.
func hides(r, prev, next rune) bool {
	switch {
	case r >= '\u202A' && r <= '\u202E', r >= '\u2066' && r <= '\u2069':
		// Bidirectional embeddings, overrides, their pop, and isolates.
		return true
	case r == '\u200B', r >= '\u2060' && r <= '\u2064', r == '\uFEFF', r == '\u180E', r == '\u00AD',
		r >= '\u206A' && r <= '\u206F', r >= '\uFFF9' && r <= '\uFFFB', r == '\u3164', r == '\uFFA0':
		// Zero-width spaces, word joiner and invisible operators, BOM,
		// Mongolian vowel separator, soft hyphen, deprecated format
		// characters, interlinear annotation, Hangul fillers shown blank.
		return true
	case r >= tagFirst && r <= tagLast:
		return true // a tag character outside a flag
	case r == zwj || r == zwnj:
		return !joining(prev) || !joining(next) // kept where it joins emoji or letters
	case isVariationSelector(r):
		return prev < 0 || isVariationSelector(prev) || unicode.IsSpace(prev) || unicode.IsControl(prev)
	}
	return false
}

// joining reports whether a joiner may stand next to r: a letter or mark
// (ZWJ and ZWNJ shape Indic and Arabic script), or part of an emoji.
func joining(r rune) bool {
	return r >= 0 && (unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.So, r) ||
		unicode.Is(unicode.Sk, r) || isVariationSelector(r))
}

// isVariationSelector reports whether r selects a variant of the character
// before it.
func isVariationSelector(r rune) bool {
	return r >= '\uFE00' && r <= '\uFE0F' || r >= '\U000E0100' && r <= '\U000E01EF'
}
