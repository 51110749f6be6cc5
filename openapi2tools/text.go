package openapi2tools

// This file keeps the text a model reads short: descriptions are collapsed to
// one line and cut at a word boundary within a budget.

import (
	"strings"
	"unicode/utf8"
)

// trimText collapses whitespace and cuts s to at most max runes, at a word
// boundary when one is near, ending with "…" when it cut.
func trimText(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	cut, n := 0, 0
	for i := range s {
		if n == max-1 {
			cut = i
			break
		}
		n++
	}
	if sp := strings.LastIndexByte(s[:cut], ' '); sp > cut/2 {
		cut = sp
	}
	return strings.TrimRight(s[:cut], " ,;:.") + "…"
}

// toolDescription is what a model reads about an operation: method and path,
// the summary, then as much of the description as the budget allows.
func toolDescription(method, path string, op *wireOperation, max int) string {
	parts := []string{method + " " + path + "."}
	if op.Deprecated {
		parts = append(parts, "Deprecated.")
	}
	summary := strings.TrimSpace(op.Summary)
	if summary != "" {
		parts = append(parts, strings.TrimRight(summary, ".")+".")
	}
	desc := strings.TrimSpace(op.Description)
	if desc != "" && (summary == "" || !strings.HasPrefix(desc, summary)) {
		parts = append(parts, desc)
	}
	return trimText(strings.Join(parts, " "), max)
}

// toolTitle is the annotation title: the summary, else the operationId.
func toolTitle(op *wireOperation) string {
	if t := strings.TrimSpace(op.Summary); t != "" {
		return trimText(t, 80)
	}
	return trimText(op.OperationID, 80)
}
