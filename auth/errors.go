// This file implements the package's protocol errors: OAuth error responses
// from the token endpoint (RFC 6749 §5.2), errors in WWW-Authenticate from
// resources (RFC 9449 §7.1, RFC 6750 §3.1), and rate limits (Poppy 0.1 §4.3).

package auth

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Error is an OAuth or Poppy protocol error from the Company. Compare codes
// with errors.Is(err, auth.ErrUseDPoPNonce) and friends: Is matches any
// *Error with the same Code.
type Error struct {
	// Code is the OAuth error code, such as "invalid_session".
	Code string
	// Description is error_description, as the Company sent it (cleaned of
	// control characters and cut to 300 bytes). Company text: untrusted.
	Description string
	// Status is the HTTP status of the response.
	Status int
	// Header is the response's header.
	Header http.Header
	// Extension names the required extension for extension_required.
	Extension string
	// Scope is the scope a resource names, for insufficient_scope.
	Scope string
}

// Codes of Poppy 0.1 (docs/spec-readings.md "Error codes"). Use them with errors.Is.
var (
	ErrInvalidRequest       = &Error{Code: "invalid_request"}
	ErrInvalidClient        = &Error{Code: "invalid_client"}
	ErrInvalidGrant         = &Error{Code: "invalid_grant"}
	ErrInvalidScope         = &Error{Code: "invalid_scope"}
	ErrInvalidSession       = &Error{Code: "invalid_session"}
	ErrAccountMismatch      = &Error{Code: "account_mismatch"}
	ErrInvalidDPoPProof     = &Error{Code: "invalid_dpop_proof"}
	ErrUseDPoPNonce         = &Error{Code: "use_dpop_nonce"}
	ErrAuthorizationPending = &Error{Code: "authorization_pending"}
	ErrSlowDown             = &Error{Code: "slow_down"}
	ErrAccessDenied         = &Error{Code: "access_denied"}
	ErrExpiredToken         = &Error{Code: "expired_token"}
	ErrUnsupportedGrantType = &Error{Code: "unsupported_grant_type"}
	ErrExtensionRequired    = &Error{Code: "extension_required"}
	ErrInvalidToken         = &Error{Code: "invalid_token"}
	ErrSignInRequired       = &Error{Code: "sign_in_required"}
	ErrInsufficientScope    = &Error{Code: "insufficient_scope"}
)

// Error returns "auth: CODE: description (HTTP n)", naming the extension
// for extension_required and the scope for insufficient_scope.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("auth: ")
	b.WriteString(e.Code)
	switch {
	case e.Code == "extension_required" && e.Extension != "":
		// Poppy 0.1 §3.3: "It returns extension_required (HTTP 403) with the extension's name in extension."
		fmt.Fprintf(&b, ": the Company requires extension %s", untrusted.Quote(e.Extension, 300))
	case e.Scope != "":
		fmt.Fprintf(&b, ": scope %s needed", untrusted.Quote(e.Scope, 300))
	}
	if e.Description != "" {
		b.WriteString(": ")
		b.WriteString(untrusted.Quote(e.Description, 300)) // the Company's words, marked
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	return b.String()
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// errorWire is an OAuth error response body (RFC 6749 §5.2) with Poppy's
// extension field (§3.3).
type errorWire struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Extension   string `json:"extension"`
	Scope       string `json:"scope"`
}

// parseErrorBody builds an *Error from a JSON error body. It returns nil
// when the body is not one.
func parseErrorBody(status int, h http.Header, body []byte) *Error {
	var w errorWire
	if json.Unmarshal(body, &w) != nil || !untrusted.Code(w.Error) {
		return nil
	}
	return &Error{
		Code: w.Error, Description: untrusted.Text(w.Description, 300), Status: status, Header: h,
		Extension: untrusted.Text(w.Extension, 300), Scope: untrusted.Text(w.Scope, 300),
	}
}

// challengeError builds an *Error from the error in a challenge of the given
// scheme in WWW-Authenticate. It returns nil when there is none.
// RFC 9449 §7.1: the DPoP scheme carries error, error_description and algs;
// RFC 6750 §3: the Bearer scheme carries error, error_description and scope.
func challengeError(scheme string, status int, h http.Header) *Error {
	c, ok := FindChallenge(ParseChallenges(h), scheme)
	if !ok || !untrusted.Code(c.Params["error"]) {
		return nil
	}
	return &Error{
		Code: c.Params["error"], Description: untrusted.Text(c.Params["error_description"], 300),
		Status: status, Header: h, Scope: untrusted.Text(c.Params["scope"], 300), Extension: untrusted.Text(c.Params["extension"], 300),
	}
}

// RetryAfterError reports that an endpoint is rate limited and the caller's
// deadline does not leave time to wait. Nothing was sent.
type RetryAfterError struct {
	// Wait is how long to wait before sending to Endpoint again.
	Wait time.Duration
	// Endpoint is the limited endpoint: scheme, host and path.
	Endpoint string
}

// Error returns "auth: rate limited: retry after N s (endpoint)".
func (e *RetryAfterError) Error() string {
	secs := int64(math.Ceil(e.Wait.Seconds()))
	return fmt.Sprintf("auth: rate limited: retry after %d s (%s)", secs, e.Endpoint)
}

// defaultRetryAfter is used for a 429 without a usable Retry-After.
const defaultRetryAfter = retryafter.Default

// maxRetryAfter caps a Retry-After, so a hostile value cannot block forever.
const maxRetryAfter = retryafter.Max

// parseRetryAfter reads Retry-After (RFC 9110 §10.2.3): delay-seconds or an
// HTTP-date.
func parseRetryAfter(v string, now time.Time) time.Duration { return retryafter.Parse(v, now) }
