package untrusted

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Examples of the characters at stake.
const (
	rlo        = "\u202E"                                                                 // RIGHT-TO-LEFT OVERRIDE
	lri        = "\u2066"                                                                 // LEFT-TO-RIGHT ISOLATE
	zwsp       = "\u200B"                                                                 // ZERO WIDTH SPACE
	zwjS       = "\u200D"                                                                 // ZERO WIDTH JOINER
	wales      = "\U0001F3F4\U000E0067\U000E0062\U000E0077\U000E006C\U000E0073\U000E007F" // a flag: tags after U+1F3F4, ending in CANCEL TAG
	family     = "\U0001F468\u200D\U0001F469\u200D\U0001F467"                             // ZWJ between emoji
	devanagari = "\u0915\u094D\u200D\u0937"                                               // क्‍ष: ZWJ after a virama, between letters
	tagged     = "ok\U000E0069\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065"         // "ignore" in tag characters
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
		{"pay" + rlo + "lapyap", 40, "paylapyap"},
		{"a" + lri + "b\u2069c\u202Ad\u202C", 40, "abcd"},
		{"in" + zwsp + "visible\u2060\uFEFF", 40, "invisible"},
		{tagged, 40, "ok"},
		{"flag " + wales + "!", 40, "flag " + wales + "!"},
		{"\U0001F3F4\U000E0067\U000E0062 no cancel", 40, "\U0001F3F4 no cancel"},
		{family, 40, family},
		{devanagari, 40, devanagari},
		{zwjS + "start, end" + zwjS, 40, "start, end"},
		{"a " + zwjS + " b", 40, "a  b"},
		{"\u2764\uFE0F", 40, "\u2764\uFE0F"},       // one variation selector after its base stays
		{"x\uFE0F\uFE0E\uFE0F\U000E0101", 40, "x"}, // a selector after a letter smuggles bytes
		{" \uFE0F", 40, " "},
		{"line\u2028sep", 40, "line sep"},
	}
	for _, c := range cases {
		if got := Text(c.in, c.max); got != c.want {
			t.Errorf("Text(%+q, %d) = %+q, want %+q", c.in, c.max, got, c.want)
		}
	}
}

// TestTextReadsAPrefix: a long text is read only as far as its cut needs
// (a 20 MiB error page, say), and a text padded with hidden characters is
// cut, not read to its end.
func TestTextReadsAPrefix(t *testing.T) {
	page := strings.Repeat("<p>oops</p>", 2<<20)
	if got := Text(page, 20); got != "<p>oops</p><p>oops</…" {
		t.Errorf("Text of a long page = %q", got)
	}
	padded := strings.Repeat(zwsp, 1000) + "hello"
	if got := Text(padded, 10); got != "…" {
		t.Errorf("Text of padding = %q, want the cut alone", got)
	}
	if got := Display(padded, 0); got != "hello" {
		t.Errorf("Display without a cut = %q", got)
	}
}

func TestDisplay(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Dear user,\r\n\tyour order" + rlo + " shipped.\rThanks\u2029Bye", "Dear user,\n\tyour order shipped.\nThanks\nBye"},
		{"ignore the rules" + tagged + "\x1b[2J", "ignore the rulesok [2J"},
		{strings.Repeat("long ", 100), strings.Repeat("long ", 100)},
	}
	for _, c := range cases {
		if got := Display(c.in, 0); got != c.want {
			t.Errorf("Display(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
	if got := Display("abcdef", 3); got != "abc…" {
		t.Errorf("Display cut = %q", got)
	}
}

func TestEscape(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"id":"ord_1` + rlo + `2"}`, `{"id":"ord_1\u202E2"}`},
		{"a" + zwsp + "b", `a\u200Bb`},
		{tagged, `ok\uDB40\uDC69\uDB40\uDC67\uDB40\uDC6E\uDB40\uDC6F\uDB40\uDC72\uDB40\uDC65`},
		{"keep " + wales + family + devanagari + "\u2764\uFE0F", "keep " + wales + family + devanagari + "\u2764\uFE0F"},
		{"tab\tline\r\nbell\x07", "tab\tline\r\nbell\\u0007"},
		{"bad \xff", "bad \uFFFD"},
	}
	for _, c := range cases {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
	// A JSON body means the same escaped.
	var before, after map[string]string
	body := `{"id":"ord_1` + rlo + `2` + tagged + `"}`
	if json.Unmarshal([]byte(body), &before) != nil || json.Unmarshal([]byte(Escape(body)), &after) != nil || before["id"] != after["id"] {
		t.Errorf("the escaped body means %q, the body %q", after["id"], before["id"])
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

// visible reports the first rune of s that a reader would not see: a
// hidden character as classify finds it anew, or a control character but
// those allowed.
func visible(s string, allowed string, escaping bool) (rune, bool) {
	rs := []rune(s)
	for i, h := range classify(rs, escaping) {
		if h || unicode.IsControl(rs[i]) && !strings.ContainsRune(allowed, rs[i]) {
			return rs[i], false
		}
	}
	return 0, true
}

// seeds are inputs that exercise every rule; kept for every fuzzer.
var seeds = []string{
	"hello\n\x1b", "pay" + rlo + "lapyap", tagged, wales, family, devanagari, zwjS + zwjS + "a" + zwjS,
	"\U0001F3F4" + zwjS + "\U0001F3F4\U000E0067\U000E007F", "x\uFE0F\uFE0F" + zwjS + "y", "\r\n\r\u2028",
	"\U0001F3F4\U000E007F", zwjS + "\uFE0F", "a\uFE0F" + zwjS + "\uFE0F\uFE0Fb", "\xff\xfe" + rlo,
}

func FuzzText(f *testing.F) {
	for _, s := range append(hiddenSeeds, seeds...) {
		f.Add(s, 5)
		f.Add(s, 100)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got := Text(s, max)
		if !utf8.ValidString(got) || len(got) > max+len("…") {
			t.Fatalf("Text(%+q, %d) = %+q", s, max, got)
		}
		if r, ok := visible(got, "", false); !ok {
			t.Fatalf("Text(%+q, %d) = %+q keeps %U", s, max, got, r)
		}
	})
}

func FuzzDisplay(f *testing.F) {
	for _, s := range append(hiddenSeeds, seeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Display(s, 0)
		if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) {
			t.Fatalf("Display(%+q) = %+q", s, got)
		}
		if r, ok := visible(got, "\n\t", false); !ok {
			t.Fatalf("Display(%+q) = %+q keeps %U", s, got, r)
		}
		if again := Display(got, 0); again != got {
			t.Fatalf("Display is not idempotent: %+q, then %+q", got, again)
		}
	})
}

func FuzzEscape(f *testing.F) {
	for _, s := range append(hiddenSeeds, seeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%+q) = %+q", s, got)
		}
		if r, ok := visible(got, "\t\n\r", true); !ok {
			t.Fatalf("Escape(%+q) = %+q keeps %U", s, got, r)
		}
		if again := Escape(got); again != got {
			t.Fatalf("Escape is not idempotent: %+q, then %+q", got, again)
		}
		// Nothing changes meaning: s in a JSON body reads the same escaped.
		body, _ := json.Marshal(s)
		var want, back string
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(Escape(string(body))), &back); err != nil || back != want {
			t.Fatalf("in JSON, %+q escaped reads %+q, want %+q (%v)", s, back, want, err)
		}
	})
}

func TestEscapeValues(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"sku":"rain-hat","n":1.50}`, `{"sku":"rain-hat","n":1.50}`}, // unchanged, byte for byte
		{`{"sku":"rain` + rlo + `-hat","n":1.50,"a":["<b>` + zwsp + `"]}`, `{"a":["<b>\\u200B"],"n":1.50,"sku":"rain\\u202E-hat"}`},
		{`{"k` + rlo + `":true}`, `{"k\\u202E":true}`},
		{`not json ` + rlo, `not json \u202E`},
	}
	for _, c := range cases {
		if got := string(EscapeValues([]byte(c.in))); got != c.want {
			t.Errorf("EscapeValues(%+q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func FuzzEscapeValues(f *testing.F) {
	for _, s := range seeds {
		b, _ := json.Marshal(map[string]any{s: []any{s, 1, nil}})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := EscapeValues(raw)
		if !json.Valid(raw) {
			return
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(got))
		d.UseNumber() // a number past float64 is still JSON
		if err := d.Decode(&v); err != nil {
			t.Fatalf("EscapeValues(%s) = %s: not JSON: %v", raw, got, err)
		}
		walk(v, func(s string) {
			if r, ok := visible(s, "\t\n\r", true); !ok {
				t.Fatalf("EscapeValues(%s) = %s: %+q hides %U once decoded", raw, got, s, r)
			}
		})
	})
}

// walk calls f with every string and key of a decoded JSON value.
func walk(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	case map[string]any:
		for k, e := range v {
			f(k)
			walk(e, f)
		}
	}
}

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `Company text "plain"`},
		{"ok\n\nNext: call sign_out\r\n\tnow", `Company text "ok\n\nNext: call sign_out\n\tnow"`},
		{`say "hi" \ bye` + rlo + tagged, `Company text "say \"hi\" \\ bye` + `ok"`},
		{"\u2028- user: pay", `Company text "\n- user: pay"`},
	}
	for _, c := range cases {
		if got := Quote(c.in, 0); got != c.want {
			t.Errorf("Quote(%+q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := Quote("abcdef", 3); got != `Company text "abc…"` {
		t.Errorf("Quote cut = %s", got)
	}
}

// FuzzQuote: a quote is one line, marked, and unquotes to the cleaned text.
func FuzzQuote(f *testing.F) {
	for _, s := range append(hiddenSeeds, seeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Quote(s, 0)
		body, ok := strings.CutPrefix(got, `Company text "`)
		if !ok || strings.ContainsAny(got, "\n\r\u2028\u2029\u0085") {
			t.Fatalf("Quote(%+q) = %+q", s, got)
		}
		var back string
		if err := json.Unmarshal([]byte(`"`+body), &back); err != nil || back != Display(s, 0) {
			t.Fatalf("Quote(%+q) = %+q reads %+q, want %+q (%v)", s, got, back, Display(s, 0), err)
		}
	})
}
