package mcpproxy

// This file names relayed tools. MCP clients take names matching
// ^[a-zA-Z0-9_-]{1,64}$ (docs/tools.md), unique on the server, and the same on
// every run so a model's memory of them holds. The name is Prefix plus the
// upstream's name, with each other character replaced by "_"; a name that
// is too long is cut and ends with a hash of the upstream's name, and every
// name that two upstream tools would share gets that hash, so the outcome
// depends on the set of names only, never on their order.

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// maxName is the longest tool name MCP clients take.
const maxName = 64

// relayNames maps each upstream name to its relayed name. A name listed
// twice maps once.
func relayNames(prefix string, upstream []string) map[string]string {
	out := map[string]string{}
	claims := map[string][]string{} // relayed name -> upstream names wanting it
	for _, n := range upstream {
		if _, dup := out[n]; dup {
			continue
		}
		c := candidate(prefix, n)
		out[n] = c
		claims[c] = append(claims[c], n)
	}
	for _, ns := range claims {
		if len(ns) > 1 {
			for _, n := range ns {
				out[n] = hashed(prefix, n)
			}
		}
	}
	// A hashed name could still equal another: keep the first by upstream
	// name, so the choice does not depend on the order listed.
	keys := make([]string, 0, len(out))
	for n := range out {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	used := map[string]bool{}
	for _, n := range keys {
		if used[out[n]] {
			delete(out, n)
			continue
		}
		used[out[n]] = true
	}
	return out
}

// candidate is prefix plus n made valid, hashed only when too long.
func candidate(prefix, n string) string {
	full := prefix + sanitize(n)
	if len(full) <= maxName {
		return full
	}
	return hashed(prefix, n)
}

// hashed is prefix plus n made valid, cut to leave room for "_" and eight
// hex digits of n's SHA-256.
func hashed(prefix, n string) string {
	sum := sha256.Sum256([]byte(n))
	suffix := "_" + hex.EncodeToString(sum[:4])
	base := prefix + sanitize(n)
	if keep := maxName - len(suffix); len(base) > keep {
		base = base[:keep]
	}
	return base + suffix
}

// sanitize replaces every character outside [a-zA-Z0-9_-] with "_".
func sanitize(n string) string {
	var b strings.Builder
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
