package mcpauth

// This file is the package's one error type: a refused request, as RFC 6750
// §3.1 names its reasons, with the HTTP status it is answered with.

import (
	"errors"
	"net/http"
)

// Error is a request refused at /mcp, or a browser sign-in that failed.
// Its Description never holds a token or a subject.
type Error struct {
	// Code is the RFC 6750 §3.1 error code: "invalid_request",
	// "invalid_token" or "insufficient_scope"; "" for a request with no
	// token at all (RFC 6750 §3.1: the challenge then carries no error
	// code) and for the authorization server being unreachable.
	Code string
	// Description says why, for the client's developer (error_description).
	Description string
	// Status is the HTTP status the request is answered with.
	Status int
	// Err is the underlying cause, when there is one (a network error).
	Err error
}

func (e *Error) Error() string {
	msg := "mcpauth: "
	if e.Code != "" {
		msg += e.Code + ": "
	}
	msg += e.Description
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is compares codes and statuses, so errors.Is(err, ErrInvalidToken) holds
// for every invalid token, whatever its description.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && t.Status == e.Status
}

// The refusals, for errors.Is.
var (
	// ErrNoToken: the request carries no bearer token (401).
	ErrNoToken = &Error{Status: http.StatusUnauthorized, Description: "an access token is required"}
	// ErrInvalidRequest: a malformed request, such as a token in the URL (400).
	ErrInvalidRequest = &Error{Code: "invalid_request", Status: http.StatusBadRequest}
	// ErrInvalidToken: the token is expired, forged, or not for this
	// resource or issuer (401).
	ErrInvalidToken = &Error{Code: "invalid_token", Status: http.StatusUnauthorized}
	// ErrInsufficientScope: a valid token without a required scope (403).
	ErrInsufficientScope = &Error{Code: "insufficient_scope", Status: http.StatusForbidden}
	// ErrUnavailable: the authorization server's keys cannot be had now, so
	// no token can be checked (503): a client should retry, not sign in again.
	ErrUnavailable = &Error{Status: http.StatusServiceUnavailable, Description: "the authorization server cannot be reached"}
)

// invalidToken is an ErrInvalidToken saying why.
func invalidToken(why string) *Error {
	return &Error{Code: ErrInvalidToken.Code, Status: ErrInvalidToken.Status, Description: why}
}
