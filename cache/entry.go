package cache

// This file implements stored responses: what is kept of a response, how a
// request is matched against it (RFC 9111 §4.1), the copies served from it,
// and how a 304 freshens it (RFC 9111 §4.3.4).

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// entry is a stored response. It is never modified once stored: a 304
// stores a new entry, so a goroutine holding an old one can keep using it.
type entry struct {
	status       string // "200 OK"
	statusCode   int
	proto        string
	protoMajor   int
	protoMinor   int
	header       http.Header // without Age and X-Poppy-Cache
	body         []byte
	tls          *tls.ConnectionState
	uncompressed bool

	// vary maps each canonical field name the response's Vary names to the
	// request's value for it.
	vary map[string]string

	etag         string
	lastModified string
	timing       timing
}

// newEntry builds an entry from a response, its body, and the request that
// got it. header is the response's header, already given a Date.
func newEntry(req *http.Request, resp *http.Response, body []byte, t timing) *entry {
	h := resp.Header.Clone()
	// The body is held decoded and whole; its length is known.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	e := &entry{
		status:       resp.Status,
		statusCode:   resp.StatusCode,
		proto:        resp.Proto,
		protoMajor:   resp.ProtoMajor,
		protoMinor:   resp.ProtoMinor,
		body:         body,
		tls:          resp.TLS,
		uncompressed: resp.Uncompressed,
		vary:         varyValues(req, resp.Header),
	}
	e.setHeader(h, t)
	return e
}

// setHeader installs h as the stored header and derives the fields kept
// from it.
func (e *entry) setHeader(h http.Header, t timing) {
	// Age describes one message, not the stored response: it is folded into
	// timing and sent afresh on each hit (RFC 9111 §5.1).
	h.Del("Age")
	h.Del(HeaderCache)
	e.header = h
	e.etag = h.Get("ETag")
	e.lastModified = h.Get("Last-Modified")
	e.timing = t
}

// hasValidator reports whether a conditional request can validate e.
func (e *entry) hasValidator() bool {
	return e.etag != "" || e.lastModified != ""
}

// size is what e counts against Options.MaxBytes.
func (e *entry) size() int64 { return int64(len(e.body)) }

// varyNames returns the canonical field names listed by h's Vary fields.
func varyNames(h http.Header) []string {
	var names []string
	for _, line := range h.Values("Vary") {
		for _, name := range strings.Split(line, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, http.CanonicalHeaderKey(name))
			}
		}
	}
	return names
}

// varyStar reports whether h has "Vary: *". RFC 9111 §4.1: "A stored
// response with a Vary header field value containing a member "*" always
// fails to match."
func varyStar(h http.Header) bool {
	for _, name := range varyNames(h) {
		if name == "*" {
			return true
		}
	}
	return false
}

// varyValues records the request's values of the fields h's Vary names.
func varyValues(req *http.Request, h http.Header) map[string]string {
	names := varyNames(h)
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]string, len(names))
	for _, name := range names {
		m[name] = fieldValue(req.Header, name)
	}
	return m
}

// fieldValue joins a request's field lines the way RFC 9111 §4.1 compares
// them: combined, with whitespace around each member removed.
func fieldValue(h http.Header, name string) string {
	var members []string
	for _, line := range h.Values(name) {
		for _, m := range strings.Split(line, ",") {
			members = append(members, strings.TrimSpace(m))
		}
	}
	return strings.Join(members, ",")
}

// matches reports whether req selects e. RFC 9111 §4.1: "the presented
// request's header fields nominated by the Vary header field ... match".
func (e *entry) matches(req *http.Request) bool {
	for name, v := range e.vary {
		if fieldValue(req.Header, name) != v {
			return false
		}
	}
	return true
}

// response returns a fresh copy of e answering req. how is the value of
// HeaderCache; a hit also carries Age (RFC 9111 §5.1: "a cache SHOULD
// generate an Age header field in every response served from cache"), in
// whole seconds.
func (e *entry) response(req *http.Request, how string, now time.Time) *http.Response {
	h := e.header.Clone()
	h.Set(HeaderCache, how)
	if how == Hit {
		h.Set("Age", strconv.FormatInt(int64(e.timing.currentAge(now)/time.Second), 10))
	}
	var body io.ReadCloser = http.NoBody
	if req.Method != http.MethodHead && len(e.body) > 0 {
		b := new(byteBody)
		b.Reset(e.body)
		body = b
	}
	return &http.Response{
		Status:        e.status,
		StatusCode:    e.statusCode,
		Proto:         e.proto,
		ProtoMajor:    e.protoMajor,
		ProtoMinor:    e.protoMinor,
		Header:        h,
		Body:          body,
		ContentLength: int64(len(e.body)),
		Request:       req,
		TLS:           e.tls,
		Uncompressed:  e.uncompressed,
	}
}

// byteBody is a response body read from memory.
type byteBody struct{ bytes.Reader }

// Close does nothing: the bytes stay stored.
func (*byteBody) Close() error { return nil }

// notUpdated lists fields a 304 does not replace in a stored response:
// RFC 9111 §3.2 excepts Content-Length and fields about one connection or
// one encoding of the body (the stored body is already decoded).
var notUpdated = map[string]bool{
	"Connection":        true,
	"Content-Encoding":  true,
	"Content-Length":    true,
	"Content-Range":     true,
	"Keep-Alive":        true,
	"Proxy-Connection":  true,
	"Te":                true,
	"Trailer":           true,
	"Transfer-Encoding": true,
	"Upgrade":           true,
	HeaderCache:         true,
}

// freshened returns a copy of e updated by a 304 whose header is h, sent
// at requestTime and received at responseTime. RFC 9111 §4.3.4: "the cache
// MUST ... use other header fields provided in the 304 (Not Modified)
// response to replace all instances of the corresponding header fields in
// the stored response." The 304's Date and Age then give the new age, and
// the merged Cache-Control or Expires the new lifetime.
func (e *entry) freshened(h http.Header, requestTime, responseTime time.Time) *entry {
	merged := e.header.Clone()
	for name, values := range h {
		if name = http.CanonicalHeaderKey(name); !notUpdated[name] {
			merged[name] = append([]string(nil), values...)
		}
	}
	if h.Get("Date") == "" {
		// The stored Date is the old message's; this one's is its arrival.
		merged.Del("Date")
		ensureDate(merged, responseTime)
	}
	cc := parseCacheControl(merged.Values("Cache-Control"))
	ne := *e
	ne.setHeader(merged, newTiming(merged, cc, requestTime, responseTime))
	return &ne
}

// validates reports whether a 304 carrying header h is about e. RFC 9111
// §4.3.4: with a strong validator in the 304, only stored responses with
// the same validator are selected; the comparison here is the weak one
// (RFC 9110 §8.8.3.2), since compression in front of a server commonly
// weakens ETags.
func (e *entry) validates(h http.Header) bool {
	etag := h.Get("ETag")
	if etag == "" {
		return true
	}
	return e.etag != "" && strings.TrimPrefix(etag, "W/") == strings.TrimPrefix(e.etag, "W/")
}
