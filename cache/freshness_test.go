package cache

import (
	"net/http"
	"testing"
	"time"
)

func TestTiming(t *testing.T) {
	sent := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	received := sent.Add(2 * time.Second)
	date := func(d time.Duration) string { return received.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		name      string
		header    http.Header
		initial   time.Duration
		lifetime  time.Duration
		noCache   bool
		validated bool // usable only with a validator
	}{
		{
			name:     "max-age, response delay counts",
			header:   http.Header{"Date": {date(0)}, "Cache-Control": {"max-age=60"}},
			initial:  2 * time.Second, // corrected_age_value = 0 + delay
			lifetime: time.Minute,
		},
		{
			name:     "Age adds the delay",
			header:   http.Header{"Date": {date(0)}, "Cache-Control": {"max-age=60"}, "Age": {"30"}},
			initial:  32 * time.Second,
			lifetime: time.Minute,
		},
		{
			name:     "apparent age from an old Date",
			header:   http.Header{"Date": {date(-40 * time.Second)}, "Cache-Control": {"max-age=60"}},
			initial:  40 * time.Second,
			lifetime: time.Minute,
		},
		{
			name:     "Date in the future gives no negative age",
			header:   http.Header{"Date": {date(time.Hour)}, "Cache-Control": {"max-age=60"}},
			initial:  2 * time.Second,
			lifetime: time.Minute,
		},
		{
			name:     "invalid Age is ignored",
			header:   http.Header{"Date": {date(0)}, "Cache-Control": {"max-age=60"}, "Age": {"-5"}},
			initial:  2 * time.Second,
			lifetime: time.Minute,
		},
		{
			name:     "Expires minus Date",
			header:   http.Header{"Date": {date(-10 * time.Second)}, "Expires": {date(20 * time.Second)}},
			initial:  10 * time.Second,
			lifetime: 30 * time.Second,
		},
		{
			name:      "Expires in the past",
			header:    http.Header{"Date": {date(0)}, "Expires": {date(-time.Hour)}},
			initial:   2 * time.Second,
			validated: true,
		},
		{
			name:      "invalid Expires is already expired",
			header:    http.Header{"Date": {date(0)}, "Expires": {"0"}},
			initial:   2 * time.Second,
			validated: true,
		},
		{
			name:      "invalid max-age is stale, Expires ignored",
			header:    http.Header{"Date": {date(0)}, "Cache-Control": {"max-age=soon"}, "Expires": {date(time.Hour)}},
			initial:   2 * time.Second,
			validated: true,
		},
		{
			name:      "s-maxage is for shared caches",
			header:    http.Header{"Date": {date(0)}, "Cache-Control": {"s-maxage=600"}},
			initial:   2 * time.Second,
			validated: true,
		},
		{
			name:      "no-cache",
			header:    http.Header{"Date": {date(0)}, "Cache-Control": {`no-cache="Set-Cookie", max-age=600`}},
			initial:   2 * time.Second,
			lifetime:  10 * time.Minute,
			noCache:   true,
			validated: true,
		},
		{
			name:      "no explicit freshness",
			header:    http.Header{"Date": {date(0)}, "Last-Modified": {date(-time.Hour)}},
			initial:   2 * time.Second,
			validated: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := parseCacheControl(tc.header.Values("Cache-Control"))
			tm := newTiming(tc.header, cc, sent, received)
			if tm.initialAge != tc.initial || tm.lifetime != tc.lifetime || tm.noCache != tc.noCache {
				t.Errorf("timing = initial %v lifetime %v noCache %v, want %v %v %v",
					tm.initialAge, tm.lifetime, tm.noCache, tc.initial, tc.lifetime, tc.noCache)
			}
			if tm.usable(false) == tc.validated || !tm.usable(true) {
				t.Errorf("usable(false) = %v, usable(true) = %v; want %v, true",
					tm.usable(false), tm.usable(true), !tc.validated)
			}
		})
	}
}

func TestFresh(t *testing.T) {
	received := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tm := timing{responseTime: received, initialAge: 10 * time.Second, lifetime: time.Minute}
	for _, tc := range []struct {
		after time.Duration
		req   cacheControl
		fresh bool
	}{
		{0, nil, true},
		{49 * time.Second, nil, true},
		{50 * time.Second, nil, false},
		{-time.Hour, nil, true}, // a clock going back does not make it younger
		{0, cacheControl{"max-age": "11"}, true},
		{time.Second, cacheControl{"max-age": "11"}, false},
		{0, cacheControl{"no-cache": ""}, false},
	} {
		if got := tm.fresh(received.Add(tc.after), tc.req); got != tc.fresh {
			t.Errorf("fresh after %v with %v = %v, want %v", tc.after, tc.req, got, tc.fresh)
		}
	}
	if got := tm.currentAge(received.Add(-time.Hour)); got != 10*time.Second {
		t.Errorf("currentAge before responseTime = %v, want the initial age", got)
	}
}

func TestEnsureDate(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("X", 3600))
	h := http.Header{}
	ensureDate(h, now)
	if got := h.Get("Date"); got != "Wed, 04 Mar 2026 04:06:07 GMT" {
		t.Errorf("Date = %q", got)
	}
	ensureDate(h, now.Add(time.Hour))
	if got := h.Get("Date"); got != "Wed, 04 Mar 2026 04:06:07 GMT" {
		t.Errorf("existing Date replaced by %q", got)
	}
}
