package cache

// This file implements sending requests the cache could not answer: plain
// fetches, validation of stored responses (RFC 9111 §4.3), and storing what
// comes back (RFC 9111 §3).

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
)

// maxDiscard bounds how much of a 304's (normally empty) body is read so
// its connection can be reused.
const maxDiscard = 4 << 10

// fetch sends r unconditionally and stores the response if it may.
func (t *Transport) fetch(r *http.Request, key string, reqCC cacheControl) (*http.Response, error) {
	requestTime := t.timeNow()
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	return t.admit(r, key, resp, reqCC, requestTime), nil
}

// revalidate sends r made conditional on the stored response e. RFC 9111
// §4.3.1: "When generating a conditional request for validation, a cache
// ... MUST send the relevant entity tag (using If-Match, If-None-Match, or
// If-Range) if the entity tag was provided in the stored response", and
// "SHOULD send the Last-Modified value (using If-Modified-Since)".
func (t *Transport) revalidate(r *http.Request, key string, e *entry, reqCC cacheControl) (*http.Response, error) {
	cond := r.Clone(r.Context())
	if e.etag != "" {
		cond.Header.Set("If-None-Match", e.etag)
	}
	if e.lastModified != "" {
		cond.Header.Set("If-Modified-Since", e.lastModified)
	}
	requestTime := t.timeNow()
	resp, err := t.base.RoundTrip(cond)
	if err != nil {
		return nil, err
	}
	resp.Request = r
	if resp.StatusCode != http.StatusNotModified {
		// RFC 9111 §4.3.3: a full response replaces the stored one. An
		// error (5xx) is returned as it is, stale or must-revalidate alike.
		return t.admit(r, key, resp, reqCC, requestTime), nil
	}
	responseTime := t.timeNow()
	discard(resp.Body)
	if !e.validates(resp.Header) {
		// RFC 9111 §4.3.4: "If the new response contains a strong validator
		// ..., then that strong validator identifies the selected
		// representation for update". It is not the stored one, so the
		// stored one is dropped and the representation fetched whole.
		t.remove(key)
		return t.fetch(r, key, reqCC)
	}
	ne := e.freshened(resp.Header, requestTime, responseTime)
	if parseCacheControl(ne.header.Values("Cache-Control")).has("no-store") || reqCC.has("no-store") {
		t.remove(key)
	} else {
		t.put(key, ne)
	}
	t.revalidated.Add(1)
	// RFC 9111 §4.3.4: the freshened stored response is what is returned;
	// it keeps its own status (a 200, not the 304).
	return ne.response(r, Revalidated, responseTime), nil
}

// admit handles a full response to r: it stores it if it may, drops a
// stored response it makes obsolete, and returns the response for the
// caller with HeaderCache set to Miss.
func (t *Transport) admit(r *http.Request, key string, resp *http.Response, reqCC cacheControl, requestTime time.Time) *http.Response {
	responseTime := t.timeNow()
	t.misses.Add(1)
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	ensureDate(resp.Header, responseTime)
	respCC := parseCacheControl(resp.Header.Values("Cache-Control"))
	tm := newTiming(resp.Header, respCC, requestTime, responseTime)
	if t.storable(resp, respCC, reqCC, tm) {
		if body, whole := t.readBody(resp); whole {
			t.put(key, newEntry(r, resp, body, tm))
			t.stored.Add(1)
		}
	} else if resp.StatusCode < 500 {
		// The server has answered anew; an older stored response is no
		// longer what it would send. A server error says nothing of that.
		t.remove(key)
	}
	resp.Header.Set(HeaderCache, Miss)
	return resp
}

// cacheableStatus lists the statuses stored: final, understood, and
// cacheable (RFC 9110 §15.1) for the documents poppy-mcp fetches. 301 and
// 308 are here so a repeated discovery through redirects sends nothing.
var cacheableStatus = map[int]bool{
	http.StatusOK:                   true,
	http.StatusNonAuthoritativeInfo: true,
	http.StatusMovedPermanently:     true,
	http.StatusPermanentRedirect:    true,
	http.StatusNotFound:             true,
	http.StatusGone:                 true,
}

// storable reports whether resp may and should be stored. RFC 9111 §3
// lists when a cache MUST NOT store a response. private and public need no
// check: this is a private cache (RFC 9111 §5.2.2.7), and every status here
// is heuristically cacheable, so needs no public (§5.2.2.9).
func (t *Transport) storable(resp *http.Response, respCC, reqCC cacheControl, tm timing) bool {
	switch {
	case !cacheableStatus[resp.StatusCode]:
		return false
	// RFC 9111 §5.2.1.5, §5.2.2.5: no-store in the request or response.
	case reqCC.has("no-store"), respCC.has("no-store"):
		return false
	// RFC 9111 §4.1: Vary "*" always fails to match, so it is not kept.
	case varyStar(resp.Header):
		return false
	// The body is known to be too large to keep.
	case resp.ContentLength > t.maxEntryBytes:
		return false
	}
	// No heuristic freshness (RFC 9111 §4.2.2 is not used): without
	// explicit freshness or a validator a stored copy could never be used.
	return tm.usable(resp.Header.Get("ETag") != "" || resp.Header.Get("Last-Modified") != "")
}

// readBody reads resp's body to store it, reading at most MaxEntryBytes+1
// bytes. whole reports that the body was read to its end within the limit;
// then resp's body is closed and replaced by a reader of body. Otherwise
// resp's body is replaced by one that yields what was read and then the
// rest of the original, or the read error; nothing is buffered past the
// limit.
func (t *Transport) readBody(resp *http.Response) (body []byte, whole bool) {
	body, err := httpbody.Read(resp.Body, resp.ContentLength, t.maxEntryBytes+1)
	switch {
	case err != nil:
		resp.Body.Close()
		err = fmt.Errorf("cache: reading response body: %w", err)
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return nil, false
	case int64(len(body)) > t.maxEntryBytes:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil, false
	}
	resp.Body.Close()
	if cap(body)-len(body) > maxDiscard {
		// Hold only what the body needs: MaxBytes counts body bytes.
		body = bytes.Clone(body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return body, true
}

// errReader is a reader that fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// discard reads a little of body, so its connection can be reused, and
// closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDiscard))
	body.Close()
}
