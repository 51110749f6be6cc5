package httpbody

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON":                  true,
		"application/problem+json":          true,
		"application/jwk-set+json":          true,
		"text/json":                         false,
		"text/html":                         false,
		"application/json-seq":              false,
		"":                                  false,
		"application/json; charset=\"utf-8": false, // unparsable
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}

// TestReadAtMost: a body of max bytes is read whole; one byte more is
// refused with ErrTooLarge, after reading no more than max+1 bytes; a read
// error is passed on.
func TestReadAtMost(t *testing.T) {
	if b, err := ReadAtMost(strings.NewReader("abcd"), 4); err != nil || string(b) != "abcd" {
		t.Errorf("4 bytes within 4: %q, %v", b, err)
	}
	r := &countingReader{r: strings.NewReader(strings.Repeat("x", 100))}
	if _, err := ReadAtMost(r, 4); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("100 bytes within 4: %v", err)
	}
	if r.n > 5 {
		t.Errorf("read %d bytes of a body refused past 4", r.n)
	}
	boom := errors.New("boom")
	if _, err := ReadAtMost(iotest.ErrReader(boom), 4); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
}

// TestRead: Read stops at limit without an error, reads everything below
// it whatever the size hint, one byte at a time included.
func TestRead(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 100)
	for _, hint := range []int64{-1, 0, 10, 1000, 5000} {
		if b, err := Read(iotest.OneByteReader(bytes.NewReader(body)), hint, 2000); err != nil || !bytes.Equal(b, body) {
			t.Errorf("hint %d: %d bytes, %v", hint, len(b), err)
		}
		if b, err := Read(bytes.NewReader(body), hint, 300); err != nil || !bytes.Equal(b, body[:300]) {
			t.Errorf("hint %d, limit 300: %d bytes, %v", hint, len(b), err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
