package poppytest

// This file writes the Company's error answers: OAuth error JSON at the token
// endpoint (RFC 6749 §5.2, Poppy 0.1 §4.2) and WWW-Authenticate challenges at
// resources (RFC 9449 §7.1, RFC 6750 §3, Poppy 0.1 §6), counts every answer
// served, and applies rate limits (Poppy 0.1 §4.3) and slow bodies.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// oauthError is one error answer. status is its HTTP status.
type oauthError struct {
	code   string
	desc   string
	status int
}

// errorStatus gives each code its HTTP status (docs/spec-readings.md "Error codes").
// Codes not listed are 400.
var errorStatus = map[string]int{
	"invalid_client":     http.StatusUnauthorized,
	"extension_required": http.StatusForbidden,
	"invalid_token":      http.StatusUnauthorized,
	"sign_in_required":   http.StatusUnauthorized,
	"insufficient_scope": http.StatusForbidden,
}

// newError returns an error answer with code and a description.
func newError(code, format string, args ...any) *oauthError {
	status, ok := errorStatus[code]
	if !ok {
		status = http.StatusBadRequest
	}
	return &oauthError{code: code, desc: fmt.Sprintf(format, args...), status: status}
}

// agentBug records a violation of section by the request r (nil: none) and
// returns the error answer that a real Company gives to the same request.
func (s *Server) agentBug(r *http.Request, section, code, format string, args ...any) *oauthError {
	e := newError(code, format, args...)
	s.violate(r, section, code, "%s", e.desc)
	return e
}

// writeJSON writes v as a JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeTokenError writes e as an OAuth error response (RFC 6749 §5.2).
func (s *Server) writeTokenError(w http.ResponseWriter, e *oauthError) {
	s.countServed(e.code)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.desc})
}

// writeResourceError writes e as a challenge in the scheme the resource
// takes: DPoP (RFC 9449 §7.1), or Bearer with the resource metadata URL for
// MCP (RFC 6750 §3, RFC 9728 §5.1). scope is set for insufficient_scope.
func (s *Server) writeResourceError(w http.ResponseWriter, bearer bool, e *oauthError, scope string) {
	s.countServed(e.code)
	params := []string{}
	if e.code != "" {
		params = append(params, "error="+quote(e.code), "error_description="+quote(e.desc))
	}
	if scope != "" {
		params = append(params, "scope="+quote(scope))
	}
	if bearer {
		params = append(params, "resource_metadata="+quote(s.URL("mcp."+s.domain, resourceMetadataPath)))
		w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	} else {
		params = append(params, `algs="ES256"`)
		w.Header().Set("WWW-Authenticate", "DPoP "+strings.Join(params, ", "))
	}
	w.Header().Set("Cache-Control", "no-store")
	body := map[string]string{"error": e.code, "error_description": e.desc}
	if e.code == "" {
		body = map[string]string{"error": "unauthorized"}
	}
	writeJSON(w, e.status, body)
}

// quote is an RFC 9110 §5.6.4 quoted-string.
func quote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// countServed counts one answer of kind, for Served.
func (s *Server) countServed(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[kind]++
}

// Served is how many answers of kind the Server has given: an error code
// ("use_dpop_nonce", "invalid_token", ...), "rate_limited" for a 429, or
// "session_token" for a Session Token issued.
func (s *Server) Served(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[kind]
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
func (s *Server) RateLimit(host, path string, n int, retryAfter time.Duration) {
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
func (s *Server) RequireExtension(host, path, extension string) {
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
func (s *Server) checkExtension(w http.ResponseWriter, r *http.Request, host string) bool {
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
func (s *Server) checkRateLimit(w http.ResponseWriter, r *http.Request, host string) bool {
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
func (s *Server) SlowBody(host, path string, interval time.Duration) {
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
func (s *Server) slowed(w http.ResponseWriter, r *http.Request, host string) http.ResponseWriter {
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
