// Package cache is a private HTTP cache (RFC 9111) as an http.RoundTripper.
//
// Every public document poppy-mcp fetches (poppy.json, RFC 8414 and RFC 9728
// metadata, OpenAPI documents) goes through it. Poppy 0.1 §3: "Personal
// Agents SHOULD cache the document according to its HTTP caching headers",
// and §3.2 says the same of the OAuth server metadata.
//
// The cache keeps GET responses in memory, bounded by entries and by body
// bytes, least recently used first out. It has no heuristic freshness: a
// response is served without a request only while its Cache-Control max-age
// or Expires says it is fresh, and one with an ETag or Last-Modified is kept
// and validated when it is not. Requests that carry credentials bypass it.
//
// Each response that went through the cache carries the header
// X-Poppy-Cache: hit, miss or revalidated. A caller that wants the server's
// current document (discover_company refresh=true) sends the request with
// "Cache-Control: no-cache": the stored response is validated, or fetched
// again when it has no validator.
//
// One response is kept per URL: a request that does not match the stored
// response's Vary fields is sent, and its response replaces the stored one.
// Concurrent misses for one URL are each sent; the last stored wins.
package cache

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// HeaderCache is the response header that says how the cache answered: Hit,
// Miss or Revalidated. Responses that bypass the cache do not carry it.
const HeaderCache = "X-Poppy-Cache"

// Values of HeaderCache.
const (
	// Hit: served from a fresh stored response; nothing was sent.
	Hit = "hit"
	// Miss: the server sent a full response (which may have been stored).
	Miss = "miss"
	// Revalidated: the server answered a conditional request with 304 and
	// the stored response was served, with its original status.
	Revalidated = "revalidated"
)

// Default limits, used for zero Options fields.
const (
	DefaultMaxEntries    = 512
	DefaultMaxBytes      = 32 << 20
	DefaultMaxEntryBytes = 16 << 20
)

// Options configure a Transport. The zero value is usable. New copies it.
type Options struct {
	// MaxEntries is how many responses are held. Zero or less: 512.
	MaxEntries int
	// MaxBytes bounds the total body bytes held; the least recently used
	// responses are evicted to stay under it. Zero or less: 32 MiB.
	MaxBytes int64
	// MaxEntryBytes is the largest body stored. A larger response passes
	// through uncached, streamed. Zero or less: 16 MiB. It is lowered to
	// MaxBytes if larger.
	MaxEntryBytes int64
}

// Stats counts what a Transport did since it was made. It is a snapshot,
// a plain value.
type Stats struct {
	Hits        int64 // requests answered from the cache, nothing sent
	Misses      int64 // requests whose response came whole from the server
	Revalidated int64 // conditional requests answered 304
	Stored      int64 // responses stored, new or replacing another
	Evicted     int64 // responses dropped to stay within the limits
	Entries     int   // responses held now
	Bytes       int64 // body bytes held now
}

// Transport is an http.RoundTripper that caches responses to public GET
// requests. It is safe for concurrent use.
type Transport struct {
	base          http.RoundTripper
	maxBytes      int64
	maxEntryBytes int64
	// timeNow is the clock; tests replace it to move freshness.
	timeNow func() time.Time

	hits, misses, revalidated, stored, evicted atomic.Int64

	// mu guards lru and bytes.
	mu    sync.Mutex
	lru   *simplelru.LRU[string, *entry]
	bytes int64
}

// New returns a Transport that sends requests through base (nil:
// http.DefaultTransport). opts may be nil.
func New(base http.RoundTripper, opts *Options) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = DefaultMaxEntryBytes
	}
	t := &Transport{
		base:          base,
		maxBytes:      o.MaxBytes,
		maxEntryBytes: min(o.MaxEntryBytes, o.MaxBytes),
		timeNow:       time.Now,
	}
	// The callback runs inside lru's methods, so always with mu held.
	t.lru, _ = simplelru.NewLRU(o.MaxEntries, func(_ string, e *entry) {
		t.bytes -= e.size()
	})
	return t
}

// RoundTrip answers r from the cache when it can and otherwise sends it
// through the base RoundTripper, storing what may be stored. A GET or HEAD
// request that carries credentials, a body, a Range or its own conditional
// fields goes straight through. A HEAD request is answered from a fresh
// stored GET response and otherwise sent as it is.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !cacheableRequest(r) {
		return t.passThrough(r)
	}
	key := cacheKey(r)
	reqCC := requestControl(r.Header)
	e := t.lookup(key, r)
	now := t.timeNow()
	if e != nil && e.timing.fresh(now, reqCC) {
		t.hits.Add(1)
		return e.response(r, Hit, now), nil
	}
	if r.Method == http.MethodHead {
		return t.base.RoundTrip(r)
	}
	if e != nil && e.hasValidator() {
		return t.revalidate(r, key, e, reqCC)
	}
	return t.fetch(r, key, reqCC)
}

// Stats returns the counters and the current size.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	entries, bytes := t.lru.Len(), t.bytes
	t.mu.Unlock()
	return Stats{
		Hits:        t.hits.Load(),
		Misses:      t.misses.Load(),
		Revalidated: t.revalidated.Load(),
		Stored:      t.stored.Load(),
		Evicted:     t.evicted.Load(),
		Entries:     entries,
		Bytes:       bytes,
	}
}

// CloseIdleConnections closes the base RoundTripper's idle connections when
// it can, so http.Client.CloseIdleConnections reaches through the cache.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// cacheableRequest reports whether the cache may answer r or store its
// response.
func cacheableRequest(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	// A body cannot be replayed and means r is not a plain document fetch.
	if r.Body != nil && r.Body != http.NoBody {
		return false
	}
	if r.URL.User != nil {
		return false
	}
	for name := range r.Header {
		switch strings.ToLower(name) {
		// Session requests carry these; they are never public documents.
		// RFC 9111 §3.5 too keeps responses to Authorization out of
		// shared caches.
		case "authorization", "dpop",
			// The caller validates or asks for part of the body itself.
			"range", "if-range", "if-none-match", "if-modified-since",
			"if-match", "if-unmodified-since":
			return false
		}
	}
	return true
}

// passThrough sends r as it is. RFC 9111 §4.4: "A cache MUST invalidate the
// target URI (Section 7.1 of [HTTP]) when it receives a non-error status
// code in response to an unsafe request method".
func (t *Transport) passThrough(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && !safeMethod(r.Method) && resp.StatusCode < 400 {
		t.remove(cacheKey(r))
	}
	return resp, err
}

// safeMethod reports whether m is safe (RFC 9110 §9.2.1).
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// cacheKey is the target URI without its fragment. A Host that differs
// from the URL's is part of it, since it selects another server.
func cacheKey(r *http.Request) string {
	u := *r.URL
	u.Fragment, u.RawFragment, u.User = "", "", nil
	key := u.String()
	if r.Host != "" && r.Host != r.URL.Host {
		key += " " + r.Host
	}
	return key
}

// lookup returns the stored response for key if r selects it, marking it
// recently used.
func (t *Transport) lookup(key string, r *http.Request) *entry {
	t.mu.Lock()
	e, ok := t.lru.Get(key)
	t.mu.Unlock()
	if !ok || !e.matches(r) {
		return nil
	}
	return e
}

// put stores e under key, replacing what was there, then evicts the least
// recently used responses until the limits hold.
func (t *Transport) put(key string, e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.lru.Peek(key); ok {
		// Add replaces in place without calling the eviction callback.
		t.bytes -= old.size()
	}
	if t.lru.Add(key, e) {
		t.evicted.Add(1)
	}
	t.bytes += e.size()
	for t.bytes > t.maxBytes {
		if _, _, ok := t.lru.RemoveOldest(); !ok {
			break
		}
		t.evicted.Add(1)
	}
}

// remove drops what is stored under key.
func (t *Transport) remove(key string) {
	t.mu.Lock()
	t.lru.Remove(key)
	t.mu.Unlock()
}
