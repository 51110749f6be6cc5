package main

// This file phrases what stops `serve` from starting: one line on stderr
// saying what is wrong and what to do, and exit code 1, never a panic or a
// log record the user has to read twice.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// startupError is a reason serve cannot start, with what to do about it.
type startupError struct {
	what, todo string
}

func (e *startupError) Error() string { return e.what + ": " + e.todo }

// startupFailure writes err as one line and returns serve's exit code.
func startupFailure(stderr io.Writer, err error) int {
	msg := err.Error()
	var se *startupError
	if !errors.As(err, &se) {
		msg = "cannot start: " + msg
	}
	fmt.Fprintln(stderr, "poppy-mcp serve:", strings.Join(strings.Fields(msg), " "))
	return 1
}

// listenError is a listener that could not start on addr, given by flag.
func listenError(flag, addr string, err error) error {
	todo := "pick another port, or stop what is using it"
	if flag == "--pages-addr" {
		todo = "pick another port, or leave --pages-addr out for a random one"
	}
	return &startupError{what: fmt.Sprintf("cannot listen on %s %s (%v)", flag, addr, unwrapNet(err)), todo: todo}
}

// unwrapNet drops the operation and address a *net.OpError repeats.
func unwrapNet(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// isPostgresWhere reports whether where, a Store's Where() or openStore's
// description, is a PostgreSQL database's (store.DescribePostgres).
func isPostgresWhere(where string) bool { return strings.HasPrefix(where, "PostgreSQL database ") }

// storeSetting names, for advice, how the state was pointed at PostgreSQL:
// the environment variable POPPY_STORE when it gave --store's value, else
// the flag --store.
func storeSetting(value string) string {
	if env := os.Getenv("POPPY_STORE"); env != "" && env == value {
		return "the environment variable POPPY_STORE"
	}
	return "the flag --store"
}

// sameState is how advice says "with the same state": the same --store
// (or POPPY_STORE) for PostgreSQL, the same --state-dir for SQLite.
func sameState(where string) string {
	if isPostgresWhere(where) {
		return "with the same --store (or POPPY_STORE)"
	}
	return "with the same state directory (--state-dir)"
}

// stateError is the state directory dir that could not be opened.
func stateError(dir string, err error) error {
	where := "the state in " + dir
	postgres := isPostgresWhere(dir) // --store's (store.DescribePostgres)
	var se *startupError
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, store.ErrWrongKey) && postgres:
		return &startupError{what: "the state key does not open " + where + " (it was made with another key)",
			todo: "set POPPY_STATE_KEY to the key it was made with, the same on every replica, or point --store (or POPPY_STORE) at another database or schema to start afresh"}
	case errors.Is(err, store.ErrWrongKey):
		return &startupError{what: "the state key does not open " + where + " (it was made with another key)",
			todo: "set POPPY_STATE_KEY to the key it was made with, or give another --state-dir to start afresh"}
	case errors.Is(err, store.ErrNoKey) && postgres && os.Getenv("POPPY_STATE_KEY") == "":
		return &startupError{what: "state kept in PostgreSQL needs POPPY_STATE_KEY, the same key on every replica (a keychain or state.key belongs to one machine)",
			todo: "set POPPY_STATE_KEY on every replica to one key from `head -c 32 /dev/urandom | base64`, kept safe"}
	case errors.Is(err, store.ErrNoKey) && os.Getenv("POPPY_STATE_KEY") != "":
		return &startupError{what: "POPPY_STATE_KEY is not a state key (it must be 32 bytes in base64)",
			todo: "set it to the key " + where + " was made with, or for a new state directory to one from `head -c 32 /dev/urandom | base64`"}
	case errors.Is(err, store.ErrNoKey):
		return &startupError{what: strings.TrimPrefix(err.Error(), "store: "),
			todo: "set POPPY_STATE_KEY to its key, or put back the keychain entry or the state.key file, or give another --state-dir to start afresh"}
	case postgres:
		return &startupError{what: "cannot open " + where + ": " + strings.TrimPrefix(err.Error(), "store: "),
			todo: "check that PostgreSQL is running and reachable there, that its user may log in (the password in PGPASSWORD " +
				"or ~/.pgpass, never in the URL) and may create tables in the database, or point --store (or POPPY_STORE) at another database"}
	}
	return &startupError{what: "cannot open " + where + ": " + strings.TrimPrefix(err.Error(), "store: "),
		todo: "check the directory's permissions and free space, or give another --state-dir"}
}
