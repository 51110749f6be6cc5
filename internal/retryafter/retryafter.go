// Package retryafter keeps the holds a Company's 429 answers put on its
// endpoints. Poppy 0.1 §4.3: a Company "returns HTTP 429 with a Retry-After
// header when a request goes over the limit, on any of its endpoints, APIs,
// conversations, or website. The Personal Agent MUST wait at least that long
// before sending the request again."
//
// One Holds is shared by everything that talks to a Company (the Session
// transport, token requests, document fetches), so a hold set by one is
// honoured by all. Holds stores instants; each user reads them with its own
// clock, and decides itself whether to wait or to fail.
package retryafter

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default is the hold of a 429 without a usable Retry-After.
const Default = time.Second

// Max caps a hold, so a hostile Retry-After cannot block an endpoint forever.
const Max = 24 * time.Hour

// maxHolds bounds how many endpoints are held at once; past it the holds
// that have ended are dropped, then the one ending first.
const maxHolds = 4096

// Holds remembers, per endpoint, until when nothing may be sent there. The
// zero value is ready to use. It is safe for concurrent use.
type Holds struct {
	// mu guards until.
	mu    sync.Mutex
	until map[string]time.Time
}

// Hold records that nothing may be sent to endpoint before until; a later
// hold already in place wins.
func (h *Holds) Hold(endpoint string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil {
		h.until = map[string]time.Time{}
	}
	if len(h.until) >= maxHolds {
		h.pruneLocked(until)
	}
	if until.After(h.until[endpoint]) {
		h.until[endpoint] = until
	}
}

// pruneLocked drops the holds that end before now, and the one ending first
// if that frees nothing; h.mu is held.
func (h *Holds) pruneLocked(now time.Time) {
	first, firstAt := "", time.Time{}
	for ep, t := range h.until {
		if t.Before(now) {
			delete(h.until, ep)
		} else if first == "" || t.Before(firstAt) {
			first, firstAt = ep, t
		}
	}
	if len(h.until) >= maxHolds {
		delete(h.until, first)
	}
}

// Remaining is how long endpoint is still held at now; zero when it is free.
func (h *Holds) Remaining(endpoint string, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.until[endpoint]
	if !ok {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		delete(h.until, endpoint)
		return 0
	}
	return d
}

// Observe holds the endpoint of resp's request when resp is a 429, for as
// long as its Retry-After says, and reports whether it did.
func (h *Holds) Observe(resp *http.Response, now time.Time) bool {
	if resp.StatusCode != http.StatusTooManyRequests || resp.Request == nil {
		return false
	}
	h.Hold(Endpoint(resp.Request.URL), now.Add(Parse(resp.Header.Get("Retry-After"), now)))
	return true
}

// Sleep waits d, or until ctx is done, whichever comes first; it returns
// ctx's error when ctx ended the wait.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Parse reads a Retry-After value (RFC 9110 §10.2.3): delay-seconds or an
// HTTP-date. A value that is neither gives Default; the result is between
// zero and Max.
func Parse(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 63); err == nil {
		d = time.Duration(min(n, uint64(Max/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return Default
	}
	return min(max(d, 0), Max)
}

// Endpoint is the key a hold is kept under: the URL's scheme, host and path,
// without query or fragment.
func Endpoint(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + p
}
