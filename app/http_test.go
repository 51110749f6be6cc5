package app

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestHTTPAddr: a bare port binds loopback; an address off loopback
// without a token, or one that is no address, is refused.
func TestHTTPAddr(t *testing.T) {
	o := HTTPOptions{Addr: "8808"}
	if err := o.Check(); err != nil || o.Addr != "127.0.0.1:8808" {
		t.Errorf("bare port: %q, %v", o.Addr, err)
	}
	for _, bad := range []HTTPOptions{{Addr: ":8808"}, {Addr: "0.0.0.0:8808"}, {Addr: "[::]:1"}} {
		if err := bad.Check(); err == nil {
			t.Errorf("%q without a token was accepted", bad.Addr)
		}
	}
	if err := (&HTTPOptions{Addr: "nonsense"}).Check(); err == nil {
		t.Error("nonsense address accepted")
	}
}

// TestServeTokenShownOnTerminal: on a terminal, the token is shown once,
// when it is made, with a config line to paste; after that only where it is.
func TestServeTokenShownOnTerminal(t *testing.T) {
	terminal := func(io.Writer) bool { return true }
	dir := t.TempDir()
	o := &HTTPOptions{URL: "http://127.0.0.1:8808/mcp", terminal: terminal}
	var first bytes.Buffer
	if err := o.resolveToken(dir, &first); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.String(), o.Token) || !strings.Contains(first.String(), `--header "Authorization: Bearer `+o.Token+`"`) {
		t.Errorf("the first start on a terminal: %s", first.String())
	}
	again := &HTTPOptions{URL: o.URL, terminal: terminal}
	var second bytes.Buffer
	if err := again.resolveToken(dir, &second); err != nil || again.Token != o.Token || strings.Contains(second.String(), o.Token) {
		t.Errorf("the second start showed the token or made another: %s (%v)", second.String(), err)
	}
}
