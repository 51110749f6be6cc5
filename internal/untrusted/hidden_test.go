package untrusted

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestIgnorableIsUCD: ignorable, derived from the unicode package's tables,
// is the Default_Ignorable_Code_Point of the Unicode Character Database of
// the same version, code point for code point.
func TestIgnorableIsUCD(t *testing.T) {
	f, err := os.Open("testdata/default-ignorable.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[rune]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# DerivedCoreProperties-") && !strings.Contains(line, unicode.Version) {
			t.Fatalf("testdata is of %s, the unicode package of %s", line, unicode.Version)
		}
		cps, _, ok := strings.Cut(line, ";")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		a, z, found := strings.Cut(strings.TrimSpace(cps), "..")
		if !found {
			z = a
		}
		lo, err1 := strconv.ParseUint(a, 16, 32)
		hi, err2 := strconv.ParseUint(z, 16, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", line)
		}
		for r := rune(lo); r <= rune(hi); r++ {
			want[r] = true
		}
	}
	if len(want) < 4000 {
		t.Fatalf("read %d code points", len(want))
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if ignorable(r) != want[r] {
			t.Errorf("ignorable(%U) = %v, the UCD says %v", r, ignorable(r), want[r])
		}
	}
}

// TestHiddenCharacters: variation selectors outside emoji presentation
// sequences, and every other default ignorable code point and blank
// filler, are removed; the emoji sequences and the joiners that shape a
// script stay.
func TestHiddenCharacters(t *testing.T) {
	cases := []struct{ in, want string }{
		// One selector after each letter: 16 (or 256) values per letter.
		{"h\uFE01e\uFE0Fl\uFE0El\U000E0100o\U000E01EF", "hello"},
		{"a\uFE00b\u180Bc\u180Fd", "abcd"},
		{"1\uFE0F 2\uFE0E #\uFE0F", "1 2 #"},                       // digits take a selector only in a keycap
		{"1\uFE0F\u20E3", "1\uFE0F\u20E3"},                         // keycap one
		{"\u263A\uFE0E \u263A\uFE0F", "\u263A\uFE0E \u263A\uFE0F"}, // text and emoji presentation
		{"\u263A\uFE0F\uFE0F", "\u263A\uFE0F"},
		{"\U0001F600\uFE0F", "\U0001F600"},                                       // no variation sequence for it
		{"\U0001F3F3\uFE0F\u200D\U0001F308", "\U0001F3F3\uFE0F\u200D\U0001F308"}, // rainbow flag
		{"\U0001F469\U0001F3FD\u200D\U0001F4BB", "\U0001F469\U0001F3FD\u200D\U0001F4BB"},
		{"a\u200Db a\u200Cb", "ab ab"},                                                                           // joiners between Latin letters join nothing
		{"\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645", "\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645"}, // Persian ZWNJ
		{"\u0648\u200C\u0627", "\u0648\u0627"},                                                                   // WAW joins nothing after it
		{"\u0915\u094D\u200C\u0937", "\u0915\u094D\u200C\u0937"},                                                 // ZWNJ after a virama
		// Default ignorable code points that survived a hand list.
		{"a\u200Eb\u200Fc\u061Cd\u034Fe\u115Ff\u1160g\u17B4h\u17B5i", "abcdefghi"},
		{"a\u2800b\u3164c\uFFA0d\u2065e\U0001BCA0f\U0001D173g\U000E0001h\U000E0FFFi", "abcdefghi"},
		{"a\uFFF9b\uFFFAc\uFFFB", "abc"},
		// Visible format characters stay.
		{"\u0600\u0661 \U00013430 a\u00A0b", "\u0600\u0661 \U00013430 a\u00A0b"},
	}
	for _, c := range cases {
		if got := Display(c.in, 0); got != c.want {
			t.Errorf("Display(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

// allowedAt reports whether the hidden or default ignorable rs[i] of a
// cleaned text stands where it may: in an emoji sequence, or a joiner
// that shapes a script.
func allowedAt(rs []rune, i int) bool {
	before, after := rune(-1), rune(-1)
	if i > 0 {
		before = rs[i-1]
	}
	if i+1 < len(rs) {
		after = rs[i+1]
	}
	switch r := rs[i]; {
	case r == vs15 || r == vs16:
		return unicode.Is(emojiVariationBase, before) && (before >= utf8.RuneSelf || after == keycap)
	case r == zwj:
		return unicode.Is(virama, before) || unicode.Is(extendedPictographic, after) && emojiElementEnds(rs[:i])
	case r == zwnj:
		return unicode.Is(virama, before) || joinsAround(rs, i)
	case r >= flagTagLow && r <= cancelTag:
		return inFlag(rs, i)
	}
	return !invisible(rs[i]) && !unicode.Is(unicode.Variation_Selector, rs[i])
}

// emojiElementEnds reports whether rs ends in a pictograph, maybe followed
// by VS16 or emoji modifiers.
func emojiElementEnds(rs []rune) bool {
	for n := len(rs) - 1; n >= 0; n-- {
		if rs[n] != vs16 && !unicode.Is(emojiModifier, rs[n]) {
			return unicode.Is(extendedPictographic, rs[n])
		}
	}
	return false
}

// joinsAround reports whether rs[i] has an L or D letter before and an R
// or D letter after, across marks of joining type T.
func joinsAround(rs []rune, i int) bool {
	j, k := i-1, i+1
	for j >= 0 && unicode.Is(joinTransparent, rs[j]) {
		j--
	}
	for k < len(rs) && unicode.Is(joinTransparent, rs[k]) {
		k++
	}
	return j >= 0 && k < len(rs) && unicode.Is(joinsAfter, rs[j]) && unicode.Is(joinsBefore, rs[k])
}

// inFlag reports whether the tag character rs[i] is in a run of tags
// after U+1F3F4 that ends in its only CANCEL TAG.
func inFlag(rs []rune, i int) bool {
	lo, hi := i, i
	for lo > 0 && rs[lo-1] >= flagTagLow && rs[lo-1] <= cancelTag {
		lo--
	}
	for hi+1 < len(rs) && rs[hi+1] >= flagTagLow && rs[hi+1] <= cancelTag {
		hi++
	}
	return lo > 0 && rs[lo-1] == blackFlag && hi > lo && rs[hi] == cancelTag &&
		!strings.ContainsRune(string(rs[lo:hi]), cancelTag)
}

// hiddenSeeds are inputs with the selectors, joiners and fillers at stake.
var hiddenSeeds = []string{
	"h\uFE01e\uFE0Fl\U000E0100", "1\uFE0F\u20E3#\uFE0F", "\u263A\uFE0E\uFE0F\u200D\U0001F308",
	"\U0001F469\U0001F3FD\u200D\u200D\U0001F4BB", "\u0645\u06CC\u200C\u064B\u062E", "\u0915\u094D\u200D\u200D\u0937",
	"a\u200Eb\u061C\u034F\u115F\u2800\u3164\uFFA0\uFFF9", "\U0001F3F4\U000E0067\U000E007F\u200D\U0001F308",
	"\u263A\u200B\uFE0F", "\U0001F600\u200B\u200D\U0001F600", "\u0628\u200B\u200C\u0628",
}

// FuzzHidden: what Display and Text return is valid UTF-8, cleaning it
// again changes nothing, and no default ignorable code point, variation
// selector or filler is left outside the emoji sequences and script
// joiners kept.
func FuzzHidden(f *testing.F) {
	for _, s := range append(hiddenSeeds, seeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, got := range []string{Display(s, 0), Text(s, 1<<20)} {
			if !utf8.ValidString(got) {
				t.Fatalf("cleaning %+q gave invalid UTF-8 %+q", s, got)
			}
			if again := Display(got, 0); again != got {
				t.Fatalf("cleaning is not idempotent: %+q, then %+q", got, again)
			}
			rs := []rune(got)
			for i := range rs {
				if !allowedAt(rs, i) {
					t.Fatalf("cleaning %+q left %U at %d: %+q", s, rs[i], i, got)
				}
			}
		}
	})
}

// TestEscapeKeepsWhatItKept: a selector or joiner Escape keeps after a
// character it escapes is judged after the escape, as it will be when the
// text is escaped again, so escaping twice changes nothing.
func TestEscapeKeepsWhatItKept(t *testing.T) {
	for _, s := range []string{"\u263A\u200B\uFE0F", "\U0001F600\u200B\u200D\U0001F600", "\u0628\u200B\u200C\u0628",
		"\u2060\uFE0F\u20E3", "\x07\uFE0F\u20E3", "\u0915\u094D\u200B\u200D"} {
		once := Escape(s)
		if twice := Escape(once); twice != once {
			t.Errorf("Escape(%+q) = %+q, then %+q", s, once, twice)
		}
	}
}
