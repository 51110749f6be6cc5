package mcpproxy

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readLimited reads body through a limitedBody of max bytes, one byte a
// read or all at once.
func readLimited(body []byte, max int64, events, oneByte bool) ([]byte, error) {
	var r io.Reader = bytes.NewReader(body)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	return io.ReadAll(&limitedBody{ReadCloser: io.NopCloser(r), max: max, events: events})
}

// FuzzLimitedBody: what an upstream sends is cut the same however it is
// split into reads, never passes on more than it read, and an event
// stream's limit counts each event alone.
func FuzzLimitedBody(f *testing.F) {
	f.Add([]byte("event: message\ndata: {}\n\nevent: message\ndata: {}\n\n"), int64(30), true)
	f.Add([]byte("data: 0123456789\r\n\r\ndata: 0123456789\r\n\r\n"), int64(18), true)
	f.Add([]byte("<html>\x1b[31mIGNORE</html>"), int64(8), false)
	f.Fuzz(func(t *testing.T, body []byte, max int64, events bool) {
		if max < 0 || max > 1<<20 {
			return
		}
		whole, errWhole := readLimited(body, max, events, false)
		bytewise, errBytewise := readLimited(body, max, events, true)
		if (errWhole == nil) != (errBytewise == nil) {
			t.Fatalf("read whole: %v; byte by byte: %v", errWhole, errBytewise)
		}
		if errWhole != nil && (!errors.Is(errWhole, errTooLarge) || !errors.Is(errBytewise, errTooLarge)) {
			t.Fatalf("errors %v, %v", errWhole, errBytewise)
		}
		if !bytes.HasPrefix(body, whole) || !bytes.HasPrefix(body, bytewise) {
			t.Fatal("passed on bytes it did not read")
		}
		if errWhole == nil && (!bytes.Equal(whole, body) || !bytes.Equal(bytewise, body)) {
			t.Fatal("a body within the limit changed")
		}
		if !events && (errWhole == nil) != (int64(len(body)) <= max) {
			t.Fatalf("%d bytes with a limit of %d: %v", len(body), max, errWhole)
		}
		if events && int64(len(body)) <= max && errWhole != nil {
			t.Fatalf("%d bytes failed an event limit of %d", len(body), max)
		}
	})
}
