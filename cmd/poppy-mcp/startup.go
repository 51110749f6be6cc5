package main

// This file phrases what stops `serve` from starting: one line on stderr
// saying what is wrong and what to do, and exit code 1, never a panic or a
// log record the user has to read twice.

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/app"
)

// startupFailure writes err as one line and returns serve's exit code.
func startupFailure(stderr io.Writer, err error) int {
	msg := err.Error()
	var se *app.StartError
	if !errors.As(err, &se) {
		msg = "cannot start: " + msg
	}
	fmt.Fprintln(stderr, "poppy-mcp serve:", strings.Join(strings.Fields(msg), " "))
	return 1
}
