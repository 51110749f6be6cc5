package main

// This file is how the person's commands (status, sign-out, forget, doctor)
// print: for a person, aligned columns with a status word coloured only on
// a terminal and never with NO_COLOR set (https://no-color.org); for
// scripts, --json, one indented JSON object on stdout (writeJSON). It also
// asks a yes/no question on stdin.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/poppy-mcp/poppy-mcp/internal/doctor"
)

// ui prints for a person. It is not safe for concurrent use.
type ui struct {
	w     io.Writer
	color bool
}

// newUI prints to w, in colour when w is a terminal that may show it.
func newUI(w io.Writer) *ui {
	return &ui{w: w, color: colorTerminal(w)}
}

// colorTerminal reports whether w is a terminal and nothing asks for plain
// text: NO_COLOR set to anything, or TERM=dumb.
func colorTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Status words, in the columns of doctor and status.
const (
	statusOK    = doctor.StatusOK
	statusWarn  = doctor.StatusWarn
	statusError = doctor.StatusError
	statusSkip  = doctor.StatusSkip
	statusInfo  = doctor.StatusInfo
)

// statusColors are the ANSI colours of the status words.
var statusColors = map[string]string{statusOK: "32", statusWarn: "33", statusError: "31", statusSkip: "2", statusInfo: "36"}

// word returns a status word, coloured when u is.
func (u *ui) word(status string) string {
	if c, ok := statusColors[status]; ok && u.color {
		return "\x1b[" + c + "m" + status + "\x1b[0m"
	}
	return status
}

// bold returns s in bold when u is coloured.
func (u *ui) bold(s string) string {
	if u.color {
		return "\x1b[1m" + s + "\x1b[0m"
	}
	return s
}

// line prints one line.
func (u *ui) line(format string, args ...any) { fmt.Fprintf(u.w, format+"\n", args...) }

// table prints rows with their columns aligned, each line indented by
// indent. Colour codes are zero-width for the alignment: tabwriter counts
// them, so a coloured cell is only ever in a row's last column or padded as
// if plain (see cell).
func (u *ui) table(indent string, rows [][]string) {
	tw := tabwriter.NewWriter(u.w, 0, 0, 2, ' ', tabwriter.StripEscape)
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	tw.Flush()
}

// cell returns a status word for a table column: escaped so tabwriter
// counts only its visible width (tabwriter.StripEscape).
func (u *ui) cell(status string) string {
	if !u.color {
		return status
	}
	// The colour codes go between Escape characters, which tabwriter
	// passes through without counting them.
	c := statusColors[status]
	if c == "" {
		return status
	}
	esc := string([]byte{tabwriter.Escape}) // one byte, not the rune's UTF-8
	return esc + "\x1b[" + c + "m" + esc + status + esc + "\x1b[0m" + esc
}

// when says a time for a person: its local date and time, and how long ago
// it was (or how long until it is) from now.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	rel := "just now"
	switch d := now.Sub(t); {
	case d >= time.Minute:
		rel = span(d) + " ago"
	case d <= -time.Minute:
		rel = "in " + span(-d)
	}
	return t.Local().Format("2006-01-02 15:04") + " (" + rel + ")"
}

// span is d as a person says it: "5 minutes", "3 hours", "2 days".
func span(d time.Duration) string {
	switch {
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour")
	}
	return plural(int(d/(24*time.Hour)), "day")
}

// plural is "1 thing" or "n things" ("n entries" for an entry).
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if stem, ok := strings.CutSuffix(thing, "y"); ok && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "e") &&
		!strings.HasSuffix(stem, "o") {
		return fmt.Sprintf("%d %sies", n, stem)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// printable is s for a terminal: every control character (ESC, BEL, tab,
// newline, DEL, the C1 controls), every bidirectional override and every
// byte that is not UTF-8 written as a Go escape (\x1b, \u202e), so that a
// string from a file or a Company can neither move the cursor, retitle the
// terminal, reorder a line nor break the table's columns, and is still shown.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteRune(r)
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// confirm asks question on out and reads one line from in, a byte at a
// time so that a later question reads the next line: true for y or yes.
// End of input, or anything else, is no.
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N] ", question)
	var line []byte
	b := make([]byte, 1)
	for len(line) < 64 {
		if n, err := in.Read(b); n == 0 || err != nil || b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	switch strings.ToLower(strings.TrimSpace(string(line))) {
	case "y", "yes":
		return true
	}
	return false
}
