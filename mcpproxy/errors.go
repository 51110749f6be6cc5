package mcpproxy

// This file is the package's protocol error: a JSON-RPC error the upstream
// answered (JSON-RPC 2.0 §5.1, MCP 2025-11-25 "Error Handling").

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
	return fmt.Sprintf("mcpproxy: upstream error %d: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func newError(d *mcp.JSONRPCErrorDetails) *Error {
	return &Error{Code: d.Code, Message: untrusted.Text(d.Message, 300)}
}
