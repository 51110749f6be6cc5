package main

import "testing"

// TestNearest: a typing mistake names the command or flag meant; a word
// near nothing names none.
func TestNearest(t *testing.T) {
	t.Parallel()
	commands := []string{"serve", "check", "init", "openapi", "demo", "status", "sign-out", "forget", "doctor", "version", "help"}
	for word, want := range map[string]string{
		"stauts": "status", "statu": "status", "sttaus": "status", "doctr": "doctor", "docter": "doctor", "serv": "serve",
		"sign": "sign-out", "signout": "sign-out", "Status": "status", "verison": "version",
		"frobnicate": "", "x": "", "": "", "stop": "", "he": "",
	} {
		if got := nearest(word, commands); got != want {
			t.Errorf("nearest(%q) = %q, want %q", word, got, want)
		}
	}
}

// TestPrintable: control characters, bidirectional overrides and bytes
// that are not UTF-8 are escaped; everything else, and the name, is shown.
func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"poppy":                  "poppy",
		"poppy\x1b[2J":           `poppy\x1b[2J`,
		"a\x07b\tc\nd\x7f":       `a\x07b\x09c\x0ad\x7f`,
		"\u009b31m":              `\u009b31m`,
		"abc\u202egpj.exe":       `abc\u202egpj.exe`,
		"caf\xe9":                `caf\xe9`,
		"café ünïcode \ufffd 日本": "café ünïcode \ufffd 日本",
		"\xff tab escape":        `\xff tab escape`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPlural(t *testing.T) {
	t.Parallel()
	for _, tc := range [][3]any{{1, "poppy-mcp entry", "1 poppy-mcp entry"}, {2, "poppy-mcp entry", "2 poppy-mcp entries"},
		{0, "entry", "0 entries"}, {2, "day", "2 days"}, {3, "Session", "3 Sessions"}, {2, "key", "2 keys"}} {
		if got := plural(tc[0].(int), tc[1].(string)); got != tc[2] {
			t.Errorf("plural(%v, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}
