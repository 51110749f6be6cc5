package main

// This file reads a command line as people type it (docs/tools.md
// "Commands"): the command word may come after the flags shared by every
// command (`poppy-mcp --state-dir D status`), no command word at all is
// serve, and a mistyped command or flag is answered on one line with the
// nearest one (`did you mean "status"?`) and exit status 2.

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// commandLine splits args into the command's name and its arguments. Flags
// before the command word move after it, so that `--state-dir D status` is
// `status --state-dir D`. With no command word, or a flag no command knows
// before it (whose value, if any, cannot be told from a command word), it is
// serve, whose parser then names what is wrong.
func commandLine(args []string) (string, []string) {
	takesValue := flagArity()
	i := 0
	for i < len(args) && len(args[i]) > 1 && args[i][0] == '-' && args[i] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		needs, known := takesValue[name]
		if !known {
			return "serve", args
		}
		i++
		if needs && !hasValue {
			i++
		}
	}
	if i >= len(args) || args[i] == "--" || args[i] == "" || args[i][0] == '-' {
		return "serve", args
	}
	rest := append(append([]string{}, args[:i]...), args[i+1:]...)
	return args[i], rest
}

// flagArity is every flag of every command, by name: true when it takes a
// value (a boolean flag does not), as the flag package reads it.
func flagArity() map[string]bool {
	out := map[string]bool{}
	for _, c := range commands() {
		if c.flags == nil {
			continue
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			b, ok := f.Value.(interface{ IsBoolFlag() bool })
			out[f.Name] = !ok || !b.IsBoolFlag()
		})
	}
	return out
}

// unknownCommand says, on one line, that name is no command, with the
// nearest command when one is near; it returns the usage exit status.
func unknownCommand(stderr io.Writer, prefix, name string) int {
	names := make([]string, 0, len(commands()))
	for _, c := range commands() {
		names = append(names, c.name)
	}
	hint := "."
	if near := nearest(name, names); near != "" {
		hint = fmt.Sprintf("; did you mean %q?", near)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q%s Run 'poppy-mcp help' for the commands.\n", prefix, name, hint)
	return 2
}

// flagHint ends the flag package's error err on fs: with the nearest flag
// when the flag given is not defined, else with a full stop.
func flagHint(fs *flag.FlagSet, err error) string {
	given, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return "."
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near := nearest(strings.TrimLeft(given, "-"), names); near != "" {
		return "; did you mean --" + near + "?"
	}
	return "."
}

// nearest is the candidate nearest to word (by edits, a swap of two
// neighbours counting as one), if it is near enough to be a typing
// mistake: one edit in a short word, two in a longer one. A word that is
// the start of just one candidate also names it ("sign" for "sign-out").
func nearest(word string, candidates []string) string {
	word = strings.ToLower(word)
	best, bestDist := "", 3
	if len(word) <= 4 {
		bestDist = 2
	}
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" || len(word) < 3 {
		return best
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, word) {
			if best != "" {
				return "" // the start of several: none is nearest
			}
			best = c
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours, each one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
