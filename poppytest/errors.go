package poppytest

// This file writes the Company's error answers: OAuth error JSON at the token
// endpoint (RFC 6749 §5.2, Poppy 0.1 §4.2) and WWW-Authenticate challenges at
// resources (RFC 9449 §7.1, RFC 6750 §3, Poppy 0.1 §6), counts every answer
// served (recorder's counters; faults.go applies rate limits and slow bodies).

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
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
func (s *recorder) agentBug(r *http.Request, section, code, format string, args ...any) *oauthError {
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
func (s *recorder) writeTokenError(w http.ResponseWriter, e *oauthError) {
	s.countServed(e.code)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.desc})
}

// writeResourceError writes e as a challenge in the scheme the resource
// takes: DPoP (RFC 9449 §7.1), or Bearer with the resource metadata URL for
// MCP (RFC 6750 §3, RFC 9728 §5.1). scope is set for insufficient_scope.
func (s *recorder) writeResourceError(w http.ResponseWriter, bearer bool, e *oauthError, scope string) {
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
func (s *recorder) countServed(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[kind]++
}

// Served is how many answers of kind the Server has given: an error code
// ("use_dpop_nonce", "invalid_token", ...), "rate_limited" for a 429, or
// "session_token" for a Session Token issued.
func (s *recorder) Served(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[kind]
}

// ServedCounts returns every Served counter: how many answers of each kind
// the Server has given.
func (s *recorder) ServedCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.served)
}
