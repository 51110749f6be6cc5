package openapi2tools

// This file reads the escapes of an ECMA-262 pattern in Unicode mode
// (ECMA-262 §22.2.1 AtomEscape, ClassEscape, CharacterEscape) and the Unicode
// property names \p{…} may use (§22.2.2.9); see pattern.go.

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escape reads a backslash sequence, in a class or outside one.
func (p *reParser) escape(inClass bool) (atomInfo, error) {
	start := p.pos
	p.pos++
	if p.done() {
		return atomInfo{}, p.fail(`\ at the end`)
	}
	c, size := utf8.DecodeRuneInString(p.src[p.pos:])
	lit := func(cp rune) (atomInfo, error) {
		p.pos += size
		return atomInfo{text: p.src[start:p.pos], cp: cp}, nil
	}
	switch {
	case strings.ContainsRune("dDsSwW", c):
		p.pos++
		return atomInfo{text: p.src[start:p.pos], set: true}, nil
	case c == 'p' || c == 'P':
		return p.property(start)
	case inClass && (c == 'b' || c == '-'): // ClassEscape[+U] :: b | -
		return lit(map[rune]rune{'b': '\b', '-': '-'}[c])
	case strings.ContainsRune(`^$\.*+?()[]{}|/`, c): // IdentityEscape[+U] :: SyntaxCharacter | /
		return lit(c)
	case strings.ContainsRune("fnrtv", c): // ControlEscape
		return lit(map[rune]rune{'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}[c])
	case c == 'c' && isASCIILetter(p.at(1)):
		p.pos += 2
		return atomInfo{text: p.src[start:p.pos], cp: rune(p.src[p.pos-1]) % 32}, nil
	case c == '0' && !isDigit(p.at(1)):
		return lit(0)
	case c >= '0' && c <= '9':
		return p.decimalEscape(start, inClass)
	case c == 'k' && !inClass:
		p.out.WriteString(`\k<`) // emitted ahead of the name groupName writes
		if p.at(1) != '<' {
			return atomInfo{}, p.fail(`\k without <name>`)
		}
		p.pos += 2
		return atomInfo{set: true}, p.groupName('>', false)
	case c == 'x' || c == 'u':
		return p.hexEscape(start)
	case p.lenient && c < utf8.RuneSelf && (c == ' ' || unicode.IsPunct(c) || unicode.IsSymbol(c)):
		// Every dialect reads an escaped punctuation character as itself;
		// Unicode mode allows the escape only for syntax characters.
		p.pos += size
		return atomInfo{text: string(c), cp: c}, nil
	}
	return atomInfo{}, p.fail(`\%c is no escape in Unicode mode`, c)
}

// decimalEscape reads \0 with octal digits (lenient: PCRE's and Go's octal
// escape) or a backreference \N (outside a class).
func (p *reParser) decimalEscape(start int, inClass bool) (atomInfo, error) {
	if p.at(0) == '0' {
		if !p.lenient {
			return atomInfo{}, p.fail(`\0 followed by a digit`)
		}
		v, n := 0, 1
		for n < 3 && p.at(n) >= '0' && p.at(n) <= '7' {
			v = v*8 + int(p.at(n)-'0')
			n++
		}
		p.pos += n
		return atomInfo{text: fmt.Sprintf(`\x%02X`, v), cp: rune(v)}, nil
	}
	if inClass {
		return atomInfo{}, p.fail(`\%c in a class`, p.at(0))
	}
	j, digits := digitsAt(p.src, p.pos)
	p.pos = j
	if len(digits) > 4 {
		return atomInfo{}, p.fail("backreference %s", digits)
	}
	n, _ := strconv.Atoi(digits)
	p.maxRef = max(p.maxRef, n)
	return atomInfo{text: p.src[start:p.pos], set: true}, nil
}

// hexEscape reads \xHH, \uHHHH (a surrogate pair as one code point), \u{H…}
// and, lenient, \x{H…}; p.pos is at the x or u.
func (p *reParser) hexEscape(start int) (atomInfo, error) {
	kind := p.at(0)
	if p.at(1) == '{' && (kind == 'u' || p.lenient) {
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return atomInfo{}, p.fail(`\%c{ without }`, kind)
		}
		v, ok := hexValue(p.src[p.pos+2 : p.pos+end])
		if !ok {
			return atomInfo{}, p.fail("code point %q", p.src[p.pos+2:p.pos+end])
		}
		p.pos += end + 1
		return atomInfo{text: `\u{` + p.src[start+3:p.pos-1] + "}", cp: v}, nil
	}
	n := map[byte]int{'x': 2, 'u': 4}[kind]
	v, ok := hexValue(p.src[p.pos+1 : min(len(p.src), p.pos+1+n)])
	if !ok || p.pos+1+n > len(p.src) {
		return atomInfo{}, p.fail(`\%c needs %d hex digits`, kind, n)
	}
	p.pos += 1 + n
	if kind == 'u' && utf16IsLead(v) && p.has(`\u`) {
		if w, ok := hexValue(p.src[p.pos+2 : min(len(p.src), p.pos+6)]); ok && p.pos+6 <= len(p.src) && utf16IsTrail(w) {
			p.pos += 6 // RegExpUnicodeEscapeSequence[+UnicodeMode] :: u HexLeadSurrogate \u HexTrailSurrogate
			v = (v-0xD800)<<10 + (w - 0xDC00) + 0x10000
		}
	}
	return atomInfo{text: p.src[start:p.pos], cp: v}, nil
}

func hexValue(s string) (rune, bool) {
	if s == "" {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + uint64(c-'0')
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			v = v*16 + uint64(c|0x20-'a'+10)
		default:
			return 0, false
		}
		if v > unicode.MaxRune {
			return 0, false
		}
	}
	return rune(v), true
}

func utf16IsLead(r rune) bool  { return r >= 0xD800 && r <= 0xDBFF }
func utf16IsTrail(r rune) bool { return r >= 0xDC00 && r <= 0xDFFF }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isASCIILetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// property reads \p{…} or \P{…} (lenient also \pL); p.pos is at the p or P.
func (p *reParser) property(start int) (atomInfo, error) {
	kind := p.src[p.pos : p.pos+1]
	var name string
	switch end := strings.IndexByte(p.src[p.pos:], '}'); {
	case p.at(1) == '{' && end > 0:
		name = p.src[p.pos+2 : p.pos+end]
		p.pos += end + 1
	case p.lenient && isASCIILetter(p.at(1)):
		name = p.src[p.pos+1 : p.pos+2]
		p.pos += 2
	default:
		return atomInfo{}, p.fail(`\%s without {name}`, kind)
	}
	canonical, ok := propertyName(name, p.lenient)
	if !ok {
		return atomInfo{}, p.fail("unknown Unicode property %q", name)
	}
	return atomInfo{text: `\` + kind + "{" + canonical + "}", set: true}, nil
}

// propertyName checks a UnicodePropertyValueExpression (ECMA-262 §22.2.2.9):
// name=value for General_Category, Script and Script_Extensions, or a lone
// General_Category value or binary property. Lenient, a lone script name
// (PCRE's and Go's \p{Han}) becomes Script=Han, and binary properties are
// refused: Java's POSIX names Lower, Upper and Alpha mean ASCII letters there.
func propertyName(name string, lenient bool) (string, bool) {
	if k, v, ok := strings.Cut(name, "="); ok {
		switch k {
		case "General_Category", "gc":
			return name, isCategory(v)
		case "Script", "sc", "Script_Extensions", "scx":
			return name, unicode.Scripts[v] != nil
		}
		return "", false
	}
	switch {
	case isCategory(name):
		return name, true
	case lenient && unicode.Scripts[name] != nil:
		return "Script=" + name, true
	case !lenient && binaryProperties[name]:
		return name, true
	}
	return "", false
}

// isCategory reports a General_Category value: a short name (Lu) or an alias
// (Uppercase_Letter, digit), with the same spelling ECMA-262 requires.
func isCategory(v string) bool {
	_, short := unicode.Categories[v]
	_, alias := unicode.CategoryAliases[v]
	return short || alias
}

// binaryProperties are ECMA-262's "Binary Unicode property aliases and their
// canonical property names": each name and its alias.
var binaryProperties = nameSet(`ASCII ASCII_Hex_Digit AHex Alphabetic Alpha Any Assigned
	Bidi_Control Bidi_C Bidi_Mirrored Bidi_M Case_Ignorable CI Cased
	Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM Changes_When_Lowercased CWL
	Changes_When_NFKC_Casefolded CWKCF Changes_When_Titlecased CWT Changes_When_Uppercased CWU
	Dash Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia Emoji Emoji_Component EComp
	Emoji_Modifier EMod Emoji_Modifier_Base EBase Emoji_Presentation EPres Extended_Pictographic ExtPict
	Extender Ext Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext Hex_Digit Hex
	IDS_Binary_Operator IDSB IDS_Trinary_Operator IDST ID_Continue IDC ID_Start IDS Ideographic Ideo
	Join_Control Join_C Logical_Order_Exception LOE Lowercase Lower Math
	Noncharacter_Code_Point NChar Pattern_Syntax Pat_Syn Pattern_White_Space Pat_WS
	Quotation_Mark QMark Radical Regional_Indicator RI Sentence_Terminal STerm Soft_Dotted SD
	Terminal_Punctuation Term Unified_Ideograph UIdeo Uppercase Upper Variation_Selector VS
	White_Space space XID_Continue XIDC XID_Start XIDS`)

func nameSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}
