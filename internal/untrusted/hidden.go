// This file decides which characters of a text are hidden: format
// characters that change how it reads without being seen.

package untrusted

import "unicode"

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
