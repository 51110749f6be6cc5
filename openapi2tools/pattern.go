package openapi2tools

// This file makes a schema's pattern one that MCP clients can compile. JSON
// Schema 2020-12 (Validation §6.3.3): the value of "pattern" "SHOULD be a valid
// regular expression, according to the ECMA-262 regular expression dialect",
// and clients compile it so: the TypeScript SDK's Ajv runs
// new RegExp(pattern, "u"), and one pattern it cannot compile makes it refuse
// the whole tool. Documents in the wild copy patterns from Java, PCRE or Go,
// whose escapes Unicode mode refuses (`\:`, `\-`, `[\w-.]`).
//
// ecmaPattern reads a pattern with the grammar of ECMA-262 §22.2.1 in Unicode
// mode ([+UnicodeMode]). A pattern that already is one is kept byte for byte.
// One that is not is translated where every dialect it may come from gives it
// the same meaning, and dropped otherwise. Neither github.com/dlclark/regexp2
// (ECMAScript|Unicode) nor goja's RegExp reject what Unicode mode rejects (both
// accept `\:`, `\-` and `a{`), so the grammar is read here.

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxPatternDepth bounds the nesting of groups.
const maxPatternDepth = 64

// ecmaPattern returns p as an ECMA-262 pattern valid in Unicode mode: p itself
// when it is one, else its translation, or ok false when the meaning of p is
// not certain enough to translate.
func ecmaPattern(p string) (string, bool) {
	if _, err := readPattern(p, false); err == nil {
		return p, true
	}
	out, err := readPattern(p, true)
	if err != nil {
		return "", false
	}
	if _, err := readPattern(out, false); err != nil {
		return "", false // a translation the strict reading refuses is a bug here; drop rather than emit it
	}
	return out, true
}

// readPattern parses src and returns what it emits. Strict, it accepts exactly
// the Unicode-mode grammar and emits src. Lenient, it also accepts the
// constructs below whose meaning every common dialect agrees on, and emits
// their ECMA-262 form:
//   - an escaped ASCII punctuation character or space that is no syntax
//     character (`\:`, `\_`, `\-` outside a class, `\'`): the character;
//   - a hyphen between a class escape and another atom in a class (`[\w-.]`):
//     a literal hyphen, as Annex B.1.2 and Perl read it;
//   - `{` that starts no quantifier and is followed by neither a digit nor a
//     comma, and a lone `}` or `]`: the literal character, escaped;
//   - `\A` and `\z` outside a class: `^` and `$` (a pattern has no m flag);
//   - `\x{H…}`: `\u{H…}`; `\0` and up to two octal digits: `\xHH`;
//   - `\pL` (one letter): `\p{L}`; a script name alone (`\p{Han}`): `\p{Script=Han}`;
//   - `(?P<name>…)` and `(?P=name)`: `(?<name>…)` and `\k<name>`.
//
// Lenient, it also refuses what reads differently across dialects although
// Unicode mode accepts it: `[` or `&&` inside a class (POSIX classes, Java's
// nested classes and intersections) and an empty class (`[]a]` in PCRE).
func readPattern(src string, lenient bool) (string, error) {
	p := &reParser{src: src, lenient: lenient, names: map[string]bool{}}
	if err := p.disjunction(); err != nil {
		return "", err
	}
	if !p.done() {
		return "", p.fail("unmatched )")
	}
	if p.maxRef > p.groups {
		return "", fmt.Errorf("pattern: \\%d refers to a group that does not exist", p.maxRef)
	}
	for _, n := range p.refs {
		if !p.names[n] {
			return "", fmt.Errorf("pattern: \\k<%s> refers to a group that does not exist", n)
		}
	}
	return p.out.String(), nil
}

// reParser reads one pattern. Not safe for concurrent use.
type reParser struct {
	src     string
	pos     int
	lenient bool
	out     strings.Builder
	depth   int
	groups  int             // capturing groups
	names   map[string]bool // group names
	maxRef  int             // the highest \N
	refs    []string        // \k<name> references
}

// atomInfo is a class atom: its emitted text and, for a single character, its
// code point (set is true for a class escape such as \w, which has none).
type atomInfo struct {
	text string
	cp   rune
	set  bool
}

func (p *reParser) fail(format string, args ...any) error {
	return fmt.Errorf("pattern: at %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *reParser) done() bool { return p.pos >= len(p.src) }

// at returns the byte i places ahead, or 0 past the end.
func (p *reParser) at(i int) byte {
	if p.pos+i < len(p.src) {
		return p.src[p.pos+i]
	}
	return 0
}

func (p *reParser) has(prefix string) bool { return strings.HasPrefix(p.src[p.pos:], prefix) }

// copyN emits the next n bytes as they are.
func (p *reParser) copyN(n int) {
	p.out.WriteString(p.src[p.pos : p.pos+n])
	p.pos += n
}

// Disjunction :: Alternative ( | Alternative )*
func (p *reParser) disjunction() error {
	if p.depth++; p.depth > maxPatternDepth {
		return p.fail("groups nested deeper than %d", maxPatternDepth)
	}
	defer func() { p.depth-- }()
	for {
		for !p.done() && p.at(0) != '|' && p.at(0) != ')' {
			if err := p.term(); err != nil {
				return err
			}
		}
		if p.at(0) != '|' || p.done() {
			return nil
		}
		p.copyN(1)
	}
}

// Term :: Assertion | Atom Quantifier?. ECMA-262 §22.2.1: in Unicode mode no
// assertion, lookarounds included, takes a quantifier.
func (p *reParser) term() error {
	switch {
	case p.at(0) == '^' || p.at(0) == '$':
		p.copyN(1)
		return p.noQuantifier()
	case p.has(`\b`) || p.has(`\B`):
		p.copyN(2)
		return p.noQuantifier()
	case p.lenient && (p.has(`\A`) || p.has(`\z`)):
		p.out.WriteString(map[byte]string{'A': "^", 'z': "$"}[p.at(1)])
		p.pos += 2
		return p.noQuantifier()
	case p.has("(?=") || p.has("(?!") || p.has("(?<=") || p.has("(?<!"):
		if err := p.group(); err != nil {
			return err
		}
		return p.noQuantifier()
	}
	if err := p.atom(); err != nil {
		return err
	}
	return p.quantifier()
}

func (p *reParser) noQuantifier() error {
	if c := p.at(0); c == '*' || c == '+' || c == '?' || c == '{' && quantifierLen(p.src[p.pos:]) > 0 {
		return p.fail("an assertion cannot be repeated")
	}
	return nil
}

func (p *reParser) atom() error {
	c, size := utf8.DecodeRuneInString(p.src[p.pos:])
	switch c {
	case '.':
		p.copyN(1)
	case '(':
		return p.group()
	case '[':
		return p.class()
	case '\\':
		a, err := p.escape(false)
		p.out.WriteString(a.text)
		return err
	case '*', '+', '?':
		return p.fail("nothing to repeat")
	case '{':
		if quantifierLen(p.src[p.pos:]) > 0 || !p.lenient || looksLikeQuantifier(p.src[p.pos:]) {
			return p.fail("a lone {")
		}
		p.out.WriteString(`\{`)
		p.pos++
	case '}', ']':
		if !p.lenient {
			return p.fail("a lone %c", c)
		}
		p.out.WriteString(`\` + string(c))
		p.pos++
	default:
		if c == utf8.RuneError && size <= 1 {
			return p.fail("not UTF-8")
		}
		p.copyN(size)
	}
	return nil
}

// Quantifier :: ( * | + | ? | {n} | {n,} | {n,m} ) ?opt
func (p *reParser) quantifier() error {
	switch p.at(0) {
	case '*', '+', '?':
		p.copyN(1)
	case '{':
		n := quantifierLen(p.src[p.pos:])
		if n < 0 {
			return p.fail("a quantifier's numbers are out of order")
		}
		if n == 0 {
			if !p.lenient || looksLikeQuantifier(p.src[p.pos:]) {
				return p.fail("an incomplete quantifier")
			}
			return nil // a literal {, which atom escapes
		}
		p.copyN(n)
	default:
		return nil
	}
	if p.at(0) == '?' {
		p.copyN(1)
	}
	return nil
}

// quantifierLen is the length of the {n}, {n,} or {n,m} s starts with, 0 when
// it starts with none, and -1 when n > m.
func quantifierLen(s string) int {
	i, lo := digitsAt(s, 1)
	if lo == "" {
		return 0
	}
	hi := lo
	if i < len(s) && s[i] == ',' {
		i, hi = digitsAt(s, i+1)
	}
	if i >= len(s) || s[i] != '}' {
		return 0
	}
	if hi != "" && numberLess(hi, lo) {
		return -1
	}
	return i + 1
}

func digitsAt(s string, i int) (int, string) {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	return j, s[i:j]
}

// numberLess compares two decimal numbers of any length.
func numberLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// looksLikeQuantifier: a { followed by a digit or a comma was meant as a
// quantifier ({1-70}, {,5}) and is no safe literal.
func looksLikeQuantifier(s string) bool {
	return len(s) > 1 && (s[1] >= '0' && s[1] <= '9' || s[1] == ',')
}

// group reads ( … ) in all its forms, at (.
func (p *reParser) group() error {
	switch {
	case p.has("(?:") || p.has("(?=") || p.has("(?!"):
		p.copyN(3)
	case p.has("(?<=") || p.has("(?<!"):
		p.copyN(4)
	case p.has("(?<"):
		p.copyN(3)
		if err := p.groupName('>', true); err != nil {
			return err
		}
	case p.lenient && p.has("(?P<"):
		p.out.WriteString("(?<")
		p.pos += 4
		if err := p.groupName('>', true); err != nil {
			return err
		}
	case p.lenient && p.has("(?P="):
		p.out.WriteString(`\k<`)
		p.pos += 4
		return p.groupName(')', false)
	case p.has("(?"):
		return p.fail("(? of another dialect (flags, atomic groups, comments)")
	default:
		p.copyN(1)
		p.groups++
	}
	if err := p.disjunction(); err != nil {
		return err
	}
	if p.at(0) != ')' || p.done() {
		return p.fail("missing )")
	}
	p.copyN(1)
	return nil
}

// groupName reads a name up to end and emits it followed by >. define says
// whether it names a group (else it refers to one). Names are kept to ASCII
// identifiers, which every dialect reads alike.
func (p *reParser) groupName(end byte, define bool) error {
	i := strings.IndexByte(p.src[p.pos:], end)
	if i <= 0 {
		return p.fail("a group name without %c", end)
	}
	name := p.src[p.pos : p.pos+i]
	for j, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && c >= '0' && c <= '9') {
			return p.fail("group name %q", name)
		}
	}
	switch {
	case !define:
		p.refs = append(p.refs, name)
	case p.names[name]:
		return p.fail("group name %q used twice", name)
	default:
		p.names[name] = true
		p.groups++
	}
	p.out.WriteString(name + ">")
	p.pos += i + 1
	return nil
}

// CharacterClass :: [ ^? ClassContents ]. A range's ends must be single
// characters in order (ECMA-262 §22.2.2.9.1 CharacterRange).
func (p *reParser) class() error {
	p.copyN(1)
	if p.at(0) == '^' {
		p.copyN(1)
	}
	if p.lenient && p.at(0) == ']' {
		return p.fail("an empty class, which PCRE reads as a ] in a class")
	}
	for {
		if p.done() {
			return p.fail("missing ]")
		}
		if p.at(0) == ']' {
			p.copyN(1)
			return nil
		}
		a, err := p.classAtom()
		if err != nil {
			return err
		}
		if p.at(0) != '-' || p.at(1) == ']' || p.pos+1 >= len(p.src) {
			p.out.WriteString(a.text)
			continue
		}
		p.pos++
		b, err := p.classAtom()
		if err != nil {
			return err
		}
		switch {
		case (a.set || b.set) && !p.lenient:
			return p.fail("a class escape cannot end a range")
		case a.set || b.set:
			p.out.WriteString(a.text + `\-` + b.text) // Annex B.1.2: the hyphen is itself
		case a.cp > b.cp:
			return p.fail("range out of order")
		default:
			p.out.WriteString(a.text + "-" + b.text)
		}
	}
}

func (p *reParser) classAtom() (atomInfo, error) {
	c, size := utf8.DecodeRuneInString(p.src[p.pos:])
	switch {
	case c == '\\':
		return p.escape(true)
	case p.lenient && (c == '[' || p.has("&&")):
		return atomInfo{}, p.fail("%c inside a class reads differently across dialects", c)
	case c == utf8.RuneError && size <= 1:
		return atomInfo{}, p.fail("not UTF-8")
	}
	p.pos += size
	return atomInfo{text: p.src[p.pos-size : p.pos], cp: c}, nil
}
