package poppytest

// This file holds the faults a test sets on any host and path: rate limits
// (Poppy 0.1 §4.3), required extensions (§3.3) and slow bodies, checked on
// every request before its handler.

import (
	"net/http"
	"strconv"
	"time"
)

// faults is the Server's concern of faults set by host and path. Its fields
// are guarded by the Server's mu.
type faults struct {
	*Server
	limits    map[string]*rateLimit
	extension map[string]string        // RequireExtension: host+path -> extension
	slow      map[string]time.Duration // SlowBody intervals by host+path
}

// rateLimit is one RateLimit in force on a host and path.
type rateLimit struct {
	remaining  int           // requests still to answer 429
	retryAfter time.Duration // the Retry-After they get
	until      time.Time     // no request before this time: the agent must wait
}

// RateLimit makes the next n requests to host and path (any method) get 429
// Too Many Requests with Retry-After: retryAfter, rounded up to whole
// seconds. A request that arrives before the last Retry-After has passed is
// reported as a violation (Poppy 0.1 §4.3: the agent "MUST wait at least
// that long before sending the request again").
func (s *faults) RateLimit(host, path string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := hostOnly(host) + path
	rl := s.limits[key]
	if rl == nil {
		rl = &rateLimit{}
		s.limits[key] = rl
	}
	rl.remaining, rl.retryAfter = n, retryAfter
}

// RequireExtension makes every request to host and path (any method) get
// 403 extension_required naming extension, as a Company answers a request
// it serves only to agents that support one of its extensions. "" lifts it.
// Poppy 0.1 §3.3: "It returns extension_required (HTTP 403) with the
// extension's name in extension."
func (s *faults) RequireExtension(host, path, extension string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if extension == "" {
		delete(s.extension, hostOnly(host)+path)
		return
	}
	s.extension[hostOnly(host)+path] = extension
}

// checkExtension answers 403 extension_required when RequireExtension
// applies to the request.
func (s *faults) checkExtension(w http.ResponseWriter, r *http.Request, host string) bool {
	s.mu.Lock()
	ext := s.extension[host+r.URL.Path]
	s.mu.Unlock()
	if ext == "" {
		return false
	}
	s.countServed("extension_required")
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusForbidden, map[string]string{"error": "extension_required",
		"error_description": "poppytest: this needs an extension (RequireExtension)", "extension": ext})
	return true
}

// checkRateLimit answers 429 when a RateLimit applies to the request, and
// reports a request sent before the last Retry-After had passed.
func (s *faults) checkRateLimit(w http.ResponseWriter, r *http.Request, host string) bool {
	now := s.timeNow()
	s.mu.Lock()
	rl := s.limits[host+r.URL.Path]
	if rl == nil {
		s.mu.Unlock()
		return false
	}
	early := now.Before(rl.until)
	until := rl.until
	limited := rl.remaining > 0
	secs := int64(0)
	if limited {
		rl.remaining--
		secs = int64((rl.retryAfter + time.Second - 1) / time.Second)
		rl.until = now.Add(time.Duration(secs) * time.Second)
	}
	s.mu.Unlock()
	if early {
		// Poppy 0.1 §4.3: "The Personal Agent MUST wait at least that long before sending the request again."
		s.violate(r, "4.3", "", "%s %s%s sent %s before Retry-After allowed", r.Method, host, r.URL.Path, until.Sub(now).Round(time.Millisecond))
	}
	if !limited {
		return false
	}
	s.countServed("rate_limited")
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "rate_limited",
		"error_description": "poppytest: rate limited by RateLimit"})
	return true
}

// SlowBody makes every later response at host and path (any method) send
// its status and headers at once, then its body one byte every interval,
// flushed, until the body ends or the client leaves: a Company that holds
// the agent's read open. A zero or negative interval removes the rule.
func (s *faults) SlowBody(host, path string, interval time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := hostOnly(host) + path
	if interval <= 0 {
		delete(s.slow, key)
		return
	}
	s.slow[key] = interval
}

// slowed returns w, made slow when a SlowBody applies to r.
func (s *faults) slowed(w http.ResponseWriter, r *http.Request, host string) http.ResponseWriter {
	s.mu.Lock()
	interval, ok := s.slow[host+r.URL.Path]
	s.mu.Unlock()
	if !ok {
		return w
	}
	return &slowWriter{ResponseWriter: w, r: r, interval: interval}
}

// slowWriter writes a body one byte per interval.
type slowWriter struct {
	http.ResponseWriter
	r        *http.Request
	interval time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	rc := http.NewResponseController(w.ResponseWriter)
	for i := range p {
		if _, err := w.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		if err := rc.Flush(); err != nil {
			return i + 1, err
		}
		t := time.NewTimer(w.interval)
		select {
		case <-t.C:
		case <-w.r.Context().Done():
			t.Stop()
			return i + 1, w.r.Context().Err()
		}
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
