package app

// This file opens the state and phrases what stops the agent from
// starting: what is wrong and what to do, for cmd/poppy-mcp to say in one
// line, never a panic or a log record the user has to read twice.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/store"
	"io/fs"
	"path/filepath"
)

// State says where the state is kept.
type State struct {
	// Dir is --state-dir; "" is the default directory (store.DefaultDir).
	Dir string
	// Store is --store, a PostgreSQL URL; "" keeps the state in SQLite in Dir.
	Store string
	// Metrics records the store's metrics; nil records none.
	Metrics *metrics.Recorder
}

// Open opens the state: in PostgreSQL with Store, else in SQLite in the
// state directory. It also returns where the state is, for messages (never
// a password); StateError phrases its error.
func (s State) Open(ctx context.Context) (*store.Store, string, error) {
	if s.Store != "" {
		if !store.IsPostgresURL(s.Store) {
			setting := storeSetting(s.Store)
			leave := "leave --store out"
			if strings.HasSuffix(setting, "POPPY_STORE") {
				leave = "unset POPPY_STORE"
			}
			return nil, "--store", &StartError{What: setting + " must be a postgres:// URL",
				Todo: "give postgres://USER@HOST/DATABASE (the password in PGPASSWORD), or " + leave + " to keep the state in SQLite in --state-dir"}
		}
		st, err := store.OpenPostgres(ctx, s.Store, &store.Options{Metrics: s.Metrics})
		return st, store.DescribePostgres(s.Store), err
	}
	dir, err := s.Directory()
	if err != nil {
		return nil, "", err
	}
	st, err := store.Open(ctx, dir, &store.Options{Metrics: s.Metrics})
	return st, dir, err
}

// Directory is Dir, or the default directory. With Store it still holds
// the files that are not state (the HTTP bearer token).
func (s State) Directory() (string, error) {
	if s.Dir != "" {
		return s.Dir, nil
	}
	return store.DefaultDir()
}

// StartError is a reason the agent cannot start, with what to do about it.
type StartError struct {
	What, Todo string
}

// Error is what, then what to do.
func (e *StartError) Error() string { return e.What + ": " + e.Todo }

// ListenError is a listener that could not start on addr, given by flag.
func ListenError(flag, addr string, err error) error {
	todo := "pick another port, or stop what is using it"
	if flag == "--pages-addr" {
		todo = "pick another port, or leave --pages-addr out for a random one"
	}
	return &StartError{What: fmt.Sprintf("cannot listen on %s %s (%v)", flag, addr, netguard.Cause(err)), Todo: todo}
}

// IsPostgres reports whether where, a Store's Where() or State.Open's
// description, is a PostgreSQL database's (store.DescribePostgres).
func IsPostgres(where string) bool { return strings.HasPrefix(where, "PostgreSQL database ") }

// storeSetting names, for advice, how the state was pointed at PostgreSQL:
// the environment variable POPPY_STORE when it gave --store's value, else
// the flag --store.
func storeSetting(value string) string {
	if env := os.Getenv("POPPY_STORE"); env != "" && env == value {
		return "the environment variable POPPY_STORE"
	}
	return "the flag --store"
}

// SameState is how advice says "with the same state": the same --store
// (or POPPY_STORE) for PostgreSQL, the same --state-dir for SQLite.
func SameState(where string) string {
	if IsPostgres(where) {
		return "with the same --store (or POPPY_STORE)"
	}
	return "with the same state directory (--state-dir)"
}

// StateError is the state at where (State.Open's description) that could
// not be opened, as a *StartError.
func StateError(where string, err error) error {
	var se *StartError
	if errors.As(err, &se) {
		return se
	}
	if IsPostgres(where) { // --store's (store.DescribePostgres)
		return postgresError(where, err)
	}
	in := "the state in " + where
	switch {
	case errors.Is(err, store.ErrWrongKey):
		return &StartError{What: "the state key does not open " + in + " (it was made with another key)",
			Todo: "set POPPY_STATE_KEY to the key it was made with, or give another --state-dir to start afresh"}
	case errors.Is(err, store.ErrNoKey) && os.Getenv("POPPY_STATE_KEY") != "":
		return notAStateKey(in)
	case errors.Is(err, store.ErrNoKey):
		return &StartError{What: strings.TrimPrefix(err.Error(), "store: "),
			Todo: "set POPPY_STATE_KEY to its key, or put back the keychain entry or the state.key file, or give another --state-dir to start afresh"}
	}
	return &StartError{What: "cannot open " + in + ": " + strings.TrimPrefix(err.Error(), "store: "),
		Todo: "check the directory's permissions and free space, or give another --state-dir"}
}

// postgresError is StateError for a state kept in PostgreSQL.
func postgresError(where string, err error) error {
	in := "the state in " + where
	switch {
	case errors.Is(err, store.ErrWrongKey):
		return &StartError{What: "the state key does not open " + in + " (it was made with another key)",
			Todo: "set POPPY_STATE_KEY to the key it was made with, the same on every replica, or point --store (or POPPY_STORE) at another database or schema to start afresh"}
	case errors.Is(err, store.ErrNoKey) && os.Getenv("POPPY_STATE_KEY") == "":
		return &StartError{What: "state kept in PostgreSQL needs POPPY_STATE_KEY, the same key on every replica (a keychain or state.key belongs to one machine)",
			Todo: "set POPPY_STATE_KEY on every replica to one key from `head -c 32 /dev/urandom | base64`, kept safe"}
	case errors.Is(err, store.ErrNoKey): // POPPY_STATE_KEY is set
		return notAStateKey(in)
	}
	return &StartError{What: "cannot open " + in + ": " + strings.TrimPrefix(err.Error(), "store: "),
		Todo: "check that PostgreSQL is running and reachable there, that its user may log in (the password in PGPASSWORD " +
			"or ~/.pgpass, never in the URL) and may create tables in the database, or point --store (or POPPY_STORE) at another database"}
}

// notAStateKey is a POPPY_STATE_KEY that is not a key at all.
func notAStateKey(in string) error {
	return &StartError{What: "POPPY_STATE_KEY is not a state key (it must be 32 bytes in base64)",
		Todo: "set it to the key " + in + " was made with, or for a new state directory to one from `head -c 32 /dev/urandom | base64`"}
}

// Exists reports whether the state can be opened without making it:
// PostgreSQL (Store), whose tables the database holds, or a state
// directory that holds the SQLite database. Opening a missing one would
// make the directory, the database and a state key.
func (s State) Exists() (bool, error) {
	if s.Store != "" {
		return true, nil
	}
	dir, err := s.Directory()
	if err != nil {
		return false, err
	}
	_, err = os.Stat(filepath.Join(dir, "state.db")) // store's file
	return !errors.Is(err, fs.ErrNotExist), nil
}
