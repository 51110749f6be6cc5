package openapi2tools

// This file makes names: tool names that match MCP's ^[a-zA-Z0-9_-]{1,64}$
// (docs/tools.md) after the Company's prefix, and argument names that match
// ^[a-zA-Z0-9_.-]{1,64}$ (what model APIs accept as property keys). Names are
// deterministic: a long name is shortened with a hash of the full original,
// and duplicates get a hash of their method and path, never a counter that
// would depend on the order of other operations.

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	maxToolName = 64
	maxArgName  = 64
	hashLen     = 8
)

var (
	validPrefix   = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,32}$`)
	validToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// sanitize keeps the runes ok accepts, turns runs of others into one '_',
// and trims '_' at both ends.
func sanitize(s string, ok func(rune) bool) string {
	var b strings.Builder
	under := false
	for _, r := range s {
		if ok(r) {
			b.WriteRune(r)
			under = r == '_'
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.Trim(b.String(), "_")
}

func toolRune(r rune) bool {
	return r < utf8.RuneSelf && (r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
}

func argRune(r rune) bool { return toolRune(r) || r == '.' }

// fit shortens name to max bytes by keeping its start and appending a hash
// of original, so two long names never collapse into one.
func fit(name, original string, max int) string {
	if len(name) <= max {
		return name
	}
	return strings.TrimRight(name[:max-hashLen-1], "_-.") + "_" + shortHash(original)
}

// toolNamer assigns tool names for one document.
type toolNamer struct {
	prefix string
}

// base is an operation's name before de-duplication: its operationId
// sanitised, else method and path.
func (n toolNamer) base(method, path, operationID string) string {
	original := operationID
	s := sanitize(operationID, toolRune)
	if s == "" {
		original = method + " " + path
		s = sanitize(strings.ToLower(method)+"_"+path, toolRune)
	}
	return n.prefix + fit(s, original, maxToolName-len(n.prefix))
}

// assign names every operation, in place. ops must be in a deterministic
// order; names that collide all get a hash of their method and path.
func (n toolNamer) assign(tools []Tool) {
	count := map[string]int{}
	for i := range tools {
		count[tools[i].Name]++
	}
	taken := map[string]bool{}
	for i := range tools {
		if count[tools[i].Name] == 1 {
			taken[tools[i].Name] = true
		}
	}
	for i := range tools {
		t := &tools[i]
		if count[t.Name] == 1 {
			continue
		}
		key := t.Method + " " + t.Path
		name := dedupe(t.Name, key, n.prefix)
		for salt := 1; taken[name]; salt++ { // a hash suffix met a real name
			name = dedupe(t.Name, key+"#"+strconv.Itoa(salt), n.prefix)
		}
		taken[name] = true
		t.Name = name
	}
}

func dedupe(name, key, prefix string) string {
	suffix := "_" + shortHash(key)
	room := maxToolName - len(suffix)
	if len(name) > room {
		name = strings.TrimRight(name[:room], "_-")
	}
	if len(name) < len(prefix) || name == prefix {
		name = prefix + "op"
	}
	return name + suffix
}

// argNamer names one operation's arguments (docs/tools.md "API arguments").
type argNamer struct{}

// name gives every argument its model-facing name: the wire name sanitised;
// where names collide, every colliding one prefixed with its location.
func (argNamer) name(args []arg) {
	for i := range args {
		args[i].Name = fit(sanitize(args[i].Key, argRune), args[i].In+" "+args[i].Key, maxArgName)
		if args[i].Name == "" {
			args[i].Name = "arg_" + shortHash(args[i].In+" "+args[i].Key)
		}
	}
	for round := 0; round < 3; round++ {
		count := map[string]int{}
		for _, a := range args {
			count[a.Name]++
		}
		clash := false
		for i := range args {
			if count[args[i].Name] > 1 {
				clash = true
				args[i].Name = fit(locationPrefix(args[i].In)+args[i].Name, args[i].In+" "+args[i].Key, maxArgName)
			}
		}
		if !clash {
			return
		}
	}
	// Still clashing (the same wire name twice in one location): hash them.
	seen := map[string]bool{}
	for i := range args {
		for salt := 0; seen[args[i].Name]; salt++ {
			n := args[i].Name[:min(len(args[i].Name), maxArgName-hashLen-1)]
			args[i].Name = n + "_" + shortHash(args[i].In+" "+args[i].Key+" "+strconv.Itoa(salt))
		}
		seen[args[i].Name] = true
	}
}

func locationPrefix(in string) string {
	if in == inWhole {
		return "body_"
	}
	return in + "_"
}
