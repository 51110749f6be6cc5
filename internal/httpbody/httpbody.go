// Package httpbody reads HTTP bodies within a size limit and recognises JSON
// media types: what every client of a Company's endpoints does before it
// parses an answer (auth, cache, conversation, discovery, the openapi
// command). A Company chooses how much it sends, so no body is read without
// a bound.
package httpbody

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
)

// ErrTooLarge is the error of ReadAtMost for a body past its bound.
var ErrTooLarge = errors.New("body too large")

// IsJSON reports whether a Content-Type is JSON: application/json, or a
// structured syntax suffix +json (RFC 6839 §3.1).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// ReadAtMost reads r to its end and fails, wrapping ErrTooLarge, when it
// holds more than most bytes; it reads at most most+1 of them.
func ReadAtMost(r io.Reader, most int64) ([]byte, error) {
	b, err := Read(r, -1, most+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > most {
		return nil, fmt.Errorf("httpbody: %w: larger than %d bytes", ErrTooLarge, most)
	}
	return b, nil
}

// Read reads r to its end or until it has read limit bytes, and returns
// what it read, with the error that stopped it (nil at the end). sizeHint,
// when not negative, is the expected length (a Content-Length): the buffer
// is sized for it at once, so a large body is not copied as it grows.
func Read(r io.Reader, sizeHint, limit int64) ([]byte, error) {
	c := int64(512)
	if sizeHint >= 0 {
		// One byte more, so the read that finds the end needs no growth.
		c = sizeHint + 1
	}
	b := make([]byte, 0, min(c, limit))
	for int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		free := b[len(b):int(min(int64(cap(b)), limit))]
		n, err := r.Read(free)
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
