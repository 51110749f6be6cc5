package mcpproxy

// This file is the package's protocol error: a JSON-RPC error the upstream
// answered (JSON-RPC 2.0 §5.1, MCP 2025-11-25 "Error Handling"); and the
// cleaned text of other errors of a request, which may carry what the
// upstream sent.

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Error is a JSON-RPC error from the upstream. Compare codes with
// errors.Is(err, mcpproxy.ErrInvalidParams) and friends: Is matches any
// *Error with the same Code.
type Error struct {
	// Code is the JSON-RPC error code.
	Code int
	// Message is the server's message, cleaned of control characters and
	// cut to 300 bytes. Company text: untrusted.
	Message string
}

// JSON-RPC 2.0 §5.1 codes. Use them with errors.Is.
var (
	ErrParse          = &Error{Code: mcp.PARSE_ERROR}
	ErrInvalidRequest = &Error{Code: mcp.INVALID_REQUEST}
	ErrMethodNotFound = &Error{Code: mcp.METHOD_NOT_FOUND}
	ErrInvalidParams  = &Error{Code: mcp.INVALID_PARAMS}
	ErrInternal       = &Error{Code: mcp.INTERNAL_ERROR}
)

// Error returns "mcpproxy: upstream error CODE: message".
func (e *Error) Error() string {
	return fmt.Sprintf("mcpproxy: upstream error %d: %s", e.Code, untrusted.Quote(e.Message, 300))
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func newError(d *mcp.JSONRPCErrorDetails) *Error {
	return &Error{Code: d.Code, Message: untrusted.Text(d.Message, 300)}
}

// cleanError is an error of a request whose text, which may quote what the
// upstream sent (mcp-go puts an error body in its error), is cleaned of
// control characters and cut; errors.Is and errors.As still see the error
// it wraps (auth's sign-in errors, network errors).
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

// upstreamError wraps err under a prefix made of format and args, with err's
// text cleaned and cut to 300 bytes: Company text, untrusted.
func upstreamError(err error, format string, args ...any) error {
	return &cleanError{msg: fmt.Sprintf(format, args...) + ": " + untrusted.Text(err.Error(), 300), err: err}
}
