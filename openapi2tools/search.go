package openapi2tools

// This file implements Search: a small ranked keyword search over tool names,
// operation IDs, paths, summaries, tags and descriptions, for a model that
// looks for the operation to call among hundreds.

import (
	"cmp"
	"sort"
	"strings"
	"unicode"
)

const defaultSearchLimit = 20

// Field weights: a word in the name counts most, in the description least.
const (
	weightName    = 8
	weightTag     = 5
	weightPath    = 4
	weightSummary = 3
	weightDesc    = 1
	weightPhrase  = 10 // the whole query appears in the name or summary
	weightCover   = 24 // times the share of the operation's name the query covers
)

type searchEntry struct {
	name, path, summary, desc, tags map[string]bool
	text                            string   // lower-case name, path and summary
	opWords                         []string // words of the operationId (else the name)
}

// words splits s into lower-case words at anything not a letter or digit and
// at camelCase boundaries ("getRepoContent" → get, repo, content), each
// stemmed.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, stem(strings.ToLower(string(cur))))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			if prevLower {
				flush()
			}
			cur = append(cur, r)
			prevLower = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur = append(cur, r)
			prevLower = true
		default:
			flush()
			prevLower = false
		}
	}
	flush()
	return out
}

// stem drops a plural "s", so "pulls" finds "pull" and "issue" finds "issues".
func stem(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		return w[:len(w)-1]
	}
	return w
}

// covered counts the words that some term matches.
func covered(ws, terms []string) int {
	n := 0
	for _, w := range ws {
		for _, t := range terms {
			if w == t || len(t) >= 3 && near(w, t) {
				n++
				break
			}
		}
	}
	return n
}

func wordSet(parts ...string) map[string]bool {
	m := map[string]bool{}
	for _, p := range parts {
		for _, w := range words(p) {
			m[w] = true
		}
	}
	return m
}

func (c *Catalog) buildIndex() {
	c.index = make([]searchEntry, len(c.Tools))
	for i := range c.Tools {
		t := &c.Tools[i]
		c.index[i] = searchEntry{
			name:    wordSet(t.Name, t.OperationID),
			path:    wordSet(t.Method, t.Path),
			summary: wordSet(t.Summary),
			desc:    wordSet(t.Description),
			tags:    wordSet(t.Tags...),
			text:    strings.ToLower(t.Name + " " + t.OperationID + " " + t.Path + " " + t.Summary),
			opWords: words(cmp.Or(t.OperationID, t.Name)),
		}
	}
}

// Search returns up to limit tools ranked by how well they match query (all
// tools in catalog order for an empty query). limit <= 0 means 20. A word
// matches a word of a field exactly or as a prefix of at least 3 letters.
func (c *Catalog) Search(query string, limit int) []*Tool {
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	c.searchOnce.Do(c.buildIndex)
	terms := words(query)
	type hit struct {
		i, score int
	}
	var hits []hit
	phrase := strings.ToLower(strings.TrimSpace(query))
	for i := range c.index {
		e := &c.index[i]
		score, matched := 0, 0
		for _, term := range terms {
			s := weightName*match(e.name, term) + weightTag*match(e.tags, term) +
				weightPath*match(e.path, term) + weightSummary*match(e.summary, term) + weightDesc*match(e.desc, term)
			if s > 0 {
				matched++
			}
			score += s
		}
		if len(terms) > 0 && matched == 0 {
			continue
		}
		score += matched * matched * weightName // all terms beat some terms
		score += weightCover * covered(e.opWords, terms) / max(len(e.opWords), 1)
		if len(phrase) > 2 && strings.Contains(e.text, phrase) {
			score += weightPhrase
		}
		hits = append(hits, hit{i, score})
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	out := make([]*Tool, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, &c.Tools[h.i])
	}
	return out
}

// match is 2 for an exact word, 1 for a near one, 0 for none.
func match(set map[string]bool, term string) int {
	if set[term] {
		return 2
	}
	if len(term) < 3 {
		return 0
	}
	for w := range set {
		if near(w, term) {
			return 1
		}
	}
	return 0
}

// near reports whether word and term share a stem: one is a prefix of the
// other ("issue", "issues"), or they differ only in the last two letters of
// the shorter ("repository", "repositories").
func near(word, term string) bool {
	if strings.HasPrefix(word, term) || len(word) >= 4 && strings.HasPrefix(term, word) {
		return true
	}
	short := min(len(word), len(term))
	if short < 5 {
		return false
	}
	common := 0
	for common < short && word[common] == term[common] {
		common++
	}
	return common >= short-2
}
