package cache

// This file implements freshness: a stored response's freshness lifetime
// and current age, and whether it may be used without validation. See
// RFC 9111 §4.2. There is no heuristic freshness: a response is fresh only
// for as long as its own headers say.

import (
	"net/http"
	"strings"
	"time"
)

// timing is what RFC 9111 §4.2 needs to know about a stored response.
type timing struct {
	// responseTime is when the cache received the response.
	responseTime time.Time
	// initialAge is corrected_initial_age (RFC 9111 §4.2.3).
	initialAge time.Duration
	// lifetime is the freshness lifetime (RFC 9111 §4.2.1); 0 when the
	// response carries no explicit freshness.
	lifetime time.Duration
	// noCache is set when every use needs validation (RFC 9111 §5.2.2.4).
	noCache bool
}

// newTiming computes the timing of a response whose request was sent at
// requestTime and whose header h (with directives cc) arrived at
// responseTime. h must carry a Date field (see ensureDate).
func newTiming(h http.Header, cc cacheControl, requestTime, responseTime time.Time) timing {
	date := parseHTTPDate(h.Get("Date"), responseTime)
	return timing{
		responseTime: responseTime,
		initialAge:   initialAge(h, date, requestTime, responseTime),
		lifetime:     lifetime(h, cc, date),
		// RFC 9111 §5.2.2.4: the qualified form is treated as unqualified,
		// which is always allowed since it only asks for more validation.
		noCache: cc.has("no-cache"),
	}
}

// initialAge computes corrected_initial_age. RFC 9111 §4.2.3:
//
//	apparent_age = max(0, response_time - date_value);
//	response_delay = response_time - request_time;
//	corrected_age_value = age_value + response_delay;
//	corrected_initial_age = max(apparent_age, corrected_age_value);
func initialAge(h http.Header, date, requestTime, responseTime time.Time) time.Duration {
	apparent := max(0, responseTime.Sub(date))
	// RFC 9111 §5.1: an invalid Age is ignored ("a cache SHOULD ignore the
	// field"); its value is delta-seconds.
	ageValue, _ := parseDeltaSeconds(strings.TrimSpace(h.Get("Age")))
	delay := max(0, responseTime.Sub(requestTime))
	return max(apparent, ageValue+delay)
}

// lifetime computes the freshness lifetime. RFC 9111 §4.2.1: a private cache
// uses max-age if present, else Expires minus Date; s-maxage is for shared
// caches only.
func lifetime(h http.Header, cc cacheControl, date time.Time) time.Duration {
	if maxAge, ok, invalid := cc.deltaSeconds("max-age"); ok {
		if invalid {
			// RFC 9111 §4.2.1: "If directives or their values are invalid,
			// the cache SHOULD consider the response stale" (via §5.2).
			return 0
		}
		return maxAge
	}
	expires := h.Values("Expires")
	if len(expires) == 0 {
		return 0
	}
	// RFC 9111 §5.3: "A cache recipient MUST interpret invalid date formats,
	// especially the value "0", as representing a time in the past (i.e.,
	// "already expired")."
	t, err := http.ParseTime(strings.TrimSpace(expires[0]))
	if err != nil {
		return 0
	}
	return max(0, t.Sub(date))
}

// currentAge computes current_age at now. RFC 9111 §4.2.3:
//
//	resident_time = now - response_time;
//	current_age = corrected_initial_age + resident_time;
func (t timing) currentAge(now time.Time) time.Duration {
	return t.initialAge + max(0, now.Sub(t.responseTime))
}

// fresh reports whether the response may be used at now without validation,
// given the request's directives. RFC 9111 §4.2: "response_is_fresh =
// (freshness_lifetime > current_age)". A stale response is never used
// without validation, so must-revalidate (RFC 9111 §5.2.2.2) always holds.
func (t timing) fresh(now time.Time, req cacheControl) bool {
	if t.noCache {
		// RFC 9111 §5.2.2.4: "the response MUST NOT be used to satisfy any
		// other request without forwarding it for validation".
		return false
	}
	age := t.currentAge(now)
	return t.lifetime > age && !mustRevalidateRequest(req, age)
}

// mustRevalidateRequest reports whether the request directives forbid
// serving a stored response of the given current age without validation.
func mustRevalidateRequest(cc cacheControl, age time.Duration) bool {
	// RFC 9111 §5.2.1.4: "The no-cache request directive indicates that the
	// client prefers a stored response not be used to satisfy the request
	// without successful validation on the origin server."
	if cc.has("no-cache") {
		return true
	}
	// RFC 9111 §5.2.1.1: "the client prefers a response whose age is less
	// than or equal to the specified number of seconds". Ages here are
	// measured finer than seconds, so the bound is taken as exclusive: that
	// makes max-age=0 always validate, as it is used in practice.
	if maxAge, ok, invalid := cc.deltaSeconds("max-age"); ok {
		return invalid || age >= maxAge
	}
	return false
}

// usable reports whether storing the response can ever save a request:
// either it is fresh when received or it can be validated.
func (t timing) usable(hasValidator bool) bool {
	return hasValidator || (!t.noCache && t.lifetime > t.initialAge)
}

// parseHTTPDate parses an HTTP-date, returning def when v is empty or
// invalid.
func parseHTTPDate(v string, def time.Time) time.Time {
	if t, err := http.ParseTime(strings.TrimSpace(v)); err == nil {
		return t
	}
	return def
}

// ensureDate adds a Date field to h when it has none. RFC 9110 §6.6.1: "A
// recipient with a clock that receives a response message without a Date
// header field MUST record the time it was received and append a
// corresponding Date header field to the message's header section if it is
// cached or forwarded downstream."
func ensureDate(h http.Header, received time.Time) {
	if h.Get("Date") == "" {
		h.Set("Date", received.UTC().Format(http.TimeFormat))
	}
}
