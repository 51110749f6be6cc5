// This file decides which characters are hidden: the code points Unicode
// itself says a reader is not shown (Default_Ignorable_Code_Point, UAX #44
// §5.7.2, and the blank fillers), except where they are part of an emoji
// sequence (UTS #51) or shape a script (RFC 5892 Appendix A). Everywhere
// else one of them is a character a model reads and a person does not: a
// covert channel, 16 values per letter for the variation selectors alone
// (docs/tools.md "Company text").

package untrusted

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// Characters of emoji sequences (UTS #51) and joiners.
const (
	zwnj        = '\u200C' // ZERO WIDTH NON-JOINER
	zwj         = '\u200D' // ZERO WIDTH JOINER
	vs15        = '\uFE0E' // VARIATION SELECTOR-15: text presentation
	vs16        = '\uFE0F' // VARIATION SELECTOR-16: emoji presentation
	keycap      = '\u20E3' // COMBINING ENCLOSING KEYCAP
	blackFlag   = '\U0001F3F4'
	cancelTag   = '\U000E007F'
	flagTagLow  = '\U000E0020' // the tag characters of a flag's spec: TAG SPACE ..
	flagTagHigh = '\U000E007E' // .. TAG TILDE
)

// defaultIgnorable is Default_Ignorable_Code_Point, built once from the
// unicode package's tables as UAX #44 derives it.
var defaultIgnorable = derive(unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector)

// ignorable reports whether r is a Default_Ignorable_Code_Point.
func ignorable(r rune) bool {
	return r >= '\u00AD' && unicode.Is(defaultIgnorable, r) // the first is SOFT HYPHEN
}

// derive builds the table of the code points of from that UAX #44 §5.7.2
// (DerivedCoreProperties.txt) keeps: "Generated from
// Other_Default_Ignorable_Code_Point + Cf (Format characters) +
// Variation_Selector - White_Space - FFF9..FFFB (Interlinear annotation
// format characters) - 13430..1343F (Egyptian hieroglyph format
// characters) - Prepended_Concatenation_Mark".
func derive(from ...*unicode.RangeTable) *unicode.RangeTable {
	keep := func(r rune) bool {
		return !unicode.Is(unicode.White_Space, r) && !(r >= '\uFFF9' && r <= '\uFFFB') &&
			!(r >= '\U00013430' && r <= '\U0001343F') && !unicode.Is(unicode.Prepended_Concatenation_Mark, r)
	}
	var rs []rune
	for _, t := range from {
		for _, g := range t.R16 {
			for r := rune(g.Lo); r <= rune(g.Hi); r += rune(g.Stride) {
				rs = append(rs, r)
			}
		}
		for _, g := range t.R32 {
			for r := rune(g.Lo); r <= rune(g.Hi); r += rune(g.Stride) {
				rs = append(rs, r)
			}
		}
	}
	slices.Sort(rs)
	rs = slices.DeleteFunc(slices.Compact(rs), func(r rune) bool { return !keep(r) })
	return rangeTable(rs)
}

// rangeTable is the table of the sorted code points rs.
func rangeTable(rs []rune) *unicode.RangeTable {
	t := &unicode.RangeTable{}
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if rs[j] <= 0xFFFF {
			t.R16 = append(t.R16, unicode.Range16{Lo: uint16(rs[i]), Hi: uint16(rs[j]), Stride: 1})
			if rs[j] <= unicode.MaxLatin1 {
				t.LatinOffset++
			}
		} else {
			t.R32 = append(t.R32, unicode.Range32{Lo: uint32(rs[i]), Hi: uint32(rs[j]), Stride: 1})
		}
		i = j + 1
	}
	return t
}

// invisible reports whether r is hidden wherever it stands: a default
// ignorable code point, a blank filler, or an interlinear annotation
// character (which hides the annotation it brackets).
func invisible(r rune) bool {
	switch r {
	case '\u2800', '\u3164', '\uFFA0', '\u115F', '\u1160':
		// Fillers shown blank: BRAILLE PATTERN BLANK and the Hangul fillers.
		return true
	case '\uFFF9', '\uFFFA', '\uFFFB':
		return true
	}
	return ignorable(r)
}

// plain reports whether s is valid UTF-8 with nothing that clean or
// Escape would change, or need to look at twice: the common case, read
// once without allocating.
func plain(s string) bool {
	for _, r := range s {
		if r < utf8.RuneSelf {
			if r < 0x20 || r == 0x7F {
				return false
			}
			continue
		}
		if r <= 0x9F || r == utf8.RuneError || r == '\u2028' || r == '\u2029' || invisible(r) {
			return false
		}
	}
	return true
}

// scan is the state of classify: what it kept last.
type scan struct {
	rs     []rune
	hidden []bool
	prev   rune // the last rune kept, or -1
	solid  rune // the last rune kept not of joining type T, or -1
	// emoji: the runes kept last are an emoji_zwj_element (UTS #51 ED-15a):
	// a pictograph, maybe with VS16 or an emoji modifier.
	emoji bool
}

// classify reports, for each rune, whether it is hidden. escaping says
// that Escape writes what it hides, and the control characters, as
// escapes: what is kept after one then follows the escape's last hex
// digit, as it will when the text is escaped again.
func classify(rs []rune, escaping bool) []bool {
	s := scan{rs: rs, hidden: make([]bool, len(rs)), prev: -1, solid: -1}
	for i := 0; i < len(rs); i++ {
		if rs[i] == blackFlag {
			// UTS #51 ED-14a: an emoji tag sequence is a base, tag
			// characters, and a CANCEL TAG: a subdivision flag. Kept whole.
			if end := flagEnd(rs, i); end > i {
				i = end
				s.kept(cancelTag)
				continue
			}
		}
		s.hidden[i] = s.hides(i)
		switch {
		case escaping && (s.hidden[i] || escaped(rs[i])):
			s.kept(rune(hexDigits[rs[i]&0xF]))
		case !s.hidden[i]:
			s.kept(rs[i])
		}
	}
	return s.hidden
}

// kept records that r is kept.
func (s *scan) kept(r rune) {
	s.emoji = unicode.Is(extendedPictographic, r) || s.emoji && (r == vs16 || unicode.Is(emojiModifier, r))
	s.prev = r
	if !unicode.Is(joinTransparent, r) {
		s.solid = r
	}
}

// hides reports whether rs[i], after what s kept, is hidden.
func (s *scan) hides(i int) bool {
	switch r := s.rs[i]; r {
	case vs15, vs16:
		// UTS #51 ED-8a, ED-9a: a presentation sequence is a character of
		// emoji-variation-sequences.txt and one selector; a keycap base
		// (#, *, 0-9) takes one only in a keycap sequence (ED-14c).
		if !unicode.Is(emojiVariationBase, s.prev) {
			return true
		}
		return s.prev < utf8.RuneSelf && s.next(i) != keycap
	case zwj:
		// UTS #51 ED-16: "emoji_zwj_sequence := emoji_zwj_element ( ZWJ
		// emoji_zwj_element )+"; RFC 5892 Appendix A.2: "If
		// Canonical_Combining_Class(Before(cp)) .eq. Virama Then True".
		return !(s.emoji && unicode.Is(extendedPictographic, s.next(i)) || unicode.Is(virama, s.prev))
	case zwnj:
		// RFC 5892 Appendix A.1: after a virama, or between letters that
		// join, "(Joining_Type:{L,D})(Joining_Type:T)*\u200C
		// (Joining_Type:T)*(Joining_Type:{R,D})".
		return !(unicode.Is(virama, s.prev) || s.joins(i))
	default:
		return invisible(r)
	}
}

// joins reports whether the ZWNJ rs[i] stands between letters that join:
// a kept L or D before it, an R or D after it, marks of joining type T
// between.
func (s *scan) joins(i int) bool {
	if !unicode.Is(joinsAfter, s.solid) {
		return false
	}
	for _, r := range s.rs[i+1:] {
		if !unicode.Is(joinTransparent, r) {
			return unicode.Is(joinsBefore, r)
		}
	}
	return false
}

// next is the rune after rs[i], or -1.
func (s *scan) next(i int) rune {
	if i+1 < len(s.rs) {
		return s.rs[i+1]
	}
	return -1
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
