// Package store keeps the Personal Agent's persistent state: its keys, the
// User ID it gives each Company (Poppy 0.1 §4.2), Sessions, Account Tokens
// (§4.8), conversation cursors, seen event IDs and cached blobs, leases
// (named locks every process sharing the state respects, [Store.AcquireLease])
// and notifications between them ([Store.Notify], [Store.Listen]).
//
// # Backends
//
// By default the state lives in a SQLite database (modernc.org/sqlite, pure
// Go) in a state directory, by default [DefaultDir] ([Open]). Several
// poppy-mcp processes may open the same directory at once, as assistants
// start several: the database runs in WAL mode with a busy timeout, and
// every get-or-create is atomic across processes. A hosted deployment keeps
// it in PostgreSQL instead ([OpenPostgres]), shared by every replica. Both
// run the same statements with the same meaning; what differs (placeholders,
// the database's clock, column types, migrations, how migrating is
// serialised) is in dialect.go, sqlite.go and postgres.go. Each backend has
// its own numbered migrations, recorded in a schema_version table.
//
// # People
//
// A hosted Personal Agent serves many people, and everything it keeps for a
// person is kept apart, keyed by a local user key (the hosted layer derives
// it from the issuer and subject of the person's access token).
// [Store.ForUser] returns a view of the Store scoped to one person: every
// per-person record below is read and written for that person only, and
// another person's, even under the same names, is out of its reach. The
// Store that Open returns is the view of the default user "", the only one
// of a single-user poppy-mcp (stdio, loopback HTTP); state from before
// people were kept apart belongs to it.
//
// Per person (scoped by ForUser):
//   - User IDs, one for each Company ([Store.UserID]); two people get two IDs
//     at the same Company;
//   - Sessions ([Store.PutSession]), Account Tokens ([Store.PutAccountToken]);
//   - conversations with their cursors ([Store.PutConversation]), seen
//     event IDs and the IDs of the messages sent ([Store.MarkSeen]);
//   - secrets ([Store.PutSecret]): the DPoP keys ("dpop/ISSUER/USER"),
//     messages not yet known delivered ("conversation/pending/ISSUER/USER/...");
//   - leases ([Store.AcquireLease]), such as the one held around refreshing,
//     rotating or revoking an Account Token ("account-token ISSUER USER LABEL").
//
// Shared by everyone (the same through every view):
//   - the agent's client metadata ([Store.PutAgentMetadata]); its signing key
//     is the secret "agent-key" of the default user, which is where
//     auth.Identity keeps it when given the Store Open returns;
//   - blobs ([Store.PutBlob]): translated OpenAPI catalogs, which do not
//     depend on the account;
//   - notifications ([Store.Notify]), whose payloads say whom they are for;
//   - one-time pages ([Store.PutPage]), found by the hash of their token
//     through any view, each sealed to the person it was opened for;
//   - the state key check and the schema version.
//
// # Leases and fencing
//
// A lease ([Store.AcquireLease], [Store.WaitLease], [Store.KeepLease]) lets
// one holder at a time do a piece of work, judged by the database's clock,
// and expires so that another takes over from a holder that crashed. A
// holder that was only paused (a long garbage collection, SIGSTOP, a
// stalled virtual machine) may wake after that, still believing it holds
// the lease. So every lease carries a fencing token ([Lease.Token]), new
// and greater than every earlier one each time the lease changes hands,
// never reused, and the writes done under a lease go through
// [Store.Fenced]: each checks, in its own statement, that the lease is
// still held under its token, and fails with an error matching
// [ErrLeaseLost] otherwise, changing nothing. The holder that lost its
// lease stops there. [Store.TakeLease] takes a lease from its holder at
// once, for work that supersedes the holder's, and fences it the same way.
//
// # Secrets
//
// Secrets (private keys, Account Tokens, anything stored with
// [Store.PutSecret]) are encrypted at rest with AES-256-GCM under the state
// key, with the record's identity (its kind, its name or key and, for anyone
// but the default user, the local user) as additional data, so a ciphertext
// cannot be moved to another row or another person. The key is never in the
// database. For SQLite it comes from, in order, [Options.Key], the
// POPPY_STATE_KEY environment variable, the OS keychain, or the file
// state.key in the state directory. For PostgreSQL it must be [Options.Key]
// or POPPY_STATE_KEY, the same on every replica: the keychain and the key
// file belong to one machine. There is no plaintext fallback.
package store

import (
	"context"
	"crypto/cipher"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// ErrNotFound is matched (with errors.Is) by the error of every lookup of a
// record that does not exist.
var ErrNotFound = errors.New("store: not found")

// notFoundError names the record that does not exist.
type notFoundError struct{ what string }

func notFound(what string) error { return &notFoundError{what: what} }

func (e *notFoundError) Error() string { return "store: " + e.what + " not found" }

func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// Names of the files in the state directory.
const (
	dbFileName  = "state.db"
	keyFileName = "state.key"
)

// Options configure [Open] and [OpenPostgres]. A nil *Options is the same
// as a zero Options.
type Options struct {
	// Key is the 32-byte AES-256 state key. Nil: the key comes from the
	// environment variable POPPY_STATE_KEY; then, for SQLite only, the OS
	// keychain, then the file state.key in the state directory, created on
	// first use. PostgreSQL refuses to open without one of the first two.
	Key []byte

	// Now tells the time recorded in UpdatedAt fields. Nil: time.Now.
	// Leases do not use it: they go by the database's clock.
	Now func() time.Time

	// Keychain is the OS credential store asked for the state key when
	// neither Key nor POPPY_STATE_KEY gives one (SQLite only). Nil: the OS
	// keychain ([OSKeychain]). [NoKeychain] skips this step.
	Keychain Keychain

	// KeychainTimeout bounds each keychain call; a keychain that does not
	// answer in time is skipped. Zero: 3 s.
	KeychainTimeout time.Duration

	// Metrics counts failed statements and the leases held
	// (internal/metrics). Nil: nothing is recorded.
	Metrics *metrics.Recorder
}

// Store is the Personal Agent's persistent state, seen as one local user
// (see [Store.ForUser]). It is safe for concurrent use by multiple
// goroutines, and several processes (SQLite) or replicas (PostgreSQL) may
// open the same state at once.
type Store struct {
	*state // shared by every view of the same state
	// user is the local user key this view is scoped to; "" is the default
	// user.
	user string
	// fence is the lease this view's writes are done under (Fenced); nil:
	// not fenced.
	fence *Lease
}

// state is what every view of one opened state shares.
type state struct {
	db *sql.DB
	d  *dialect
	// dir is SQLite's state directory; "" for PostgreSQL.
	dir string
	// where names the state in messages: the directory, or PostgreSQL's
	// host and database (never a password).
	where     string
	now       func() time.Time
	aead      cipher.AEAD
	keySource string
	notes     *notifier
	// leaseRecheck is the dialect's, kept here so tests can change it.
	leaseRecheck time.Duration
	// pgConfig is PostgreSQL's connection settings, for the connection
	// the notifications listen on; nil for SQLite.
	pgConfig *pgx.ConnConfig
	metrics  *metrics.Recorder
	held     heldLeases
}

// conn returns the database with the dialect's placeholders.
func (s *state) conn() conn { return conn{e: s.db, d: s.d, m: s.metrics} }

// ForUser returns a view of the state scoped to the local user key:
// every per-person record it reads or writes is that person's (see the
// package documentation for which records are per person). key is opaque to
// the store; "" is the default user, the one of a single-user poppy-mcp and
// of the Store that Open returns. On PostgreSQL a key must be valid UTF-8
// without NUL bytes. The view shares the database with s: closing either
// closes both.
func (s *Store) ForUser(key string) *Store { return &Store{state: s.state, user: key} }

// User returns the local user key this view is scoped to; "" is the
// default user.
func (s *Store) User() string { return s.user }

// DefaultDir returns the default state directory: $XDG_STATE_HOME/poppy-mcp
// when XDG_STATE_HOME is set to an absolute path, else
// ~/.local/state/poppy-mcp. It does not create the directory.
func DefaultDir() (string, error) {
	// XDG Base Directory: "If an implementation encounters a relative path in
	// any of these variables it should consider the path invalid and ignore it."
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "poppy-mcp"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: no state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "poppy-mcp"), nil
}

// Open opens the SQLite state in dir, creating the directory (mode 0700),
// the database (mode 0600) and the state key as needed, and applies any
// pending schema migrations. Looser permissions on an existing directory or
// database are tightened. Open fails if the state key does not decrypt the
// state already in dir.
func Open(ctx context.Context, dir string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if dir == "" {
		return nil, errors.New("store: empty state directory")
	}
	if err := checkKeyOption(opts); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dir, dbFileName)
	if err := prepareFile(dbPath); err != nil {
		return nil, err
	}
	db, err := openSQLite(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	s := newStore(db, sqliteDialect, opts)
	s.dir, s.where = dir, dir
	if err := s.initSQLite(ctx, dbPath, opts); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func checkKeyOption(opts *Options) error {
	if opts.Key != nil && len(opts.Key) != keySize {
		return fmt.Errorf("store: Options.Key has %d bytes, want %d", len(opts.Key), keySize)
	}
	return nil
}

// newStore returns the default user's view of a state on db.
func newStore(db *sql.DB, d *dialect, opts *Options) *Store {
	s := &Store{state: &state{db: db, d: d, now: opts.Now, leaseRecheck: d.leaseRecheck, metrics: opts.Metrics}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// initSQLite migrates the schema and sets up the state key.
func (s *Store) initSQLite(ctx context.Context, dbPath string, opts *Options) error {
	if err := migrate(ctx, s.db, s.d, s.now()); err != nil {
		return err
	}
	// SQLite creates the -wal and -shm files with the database file's mode;
	// tighten them anyway in case an older process left them looser.
	for _, p := range []string{dbPath + "-wal", dbPath + "-shm"} {
		if err := tightenIfExists(p, 0o600); err != nil {
			return err
		}
	}
	key, source, err := s.resolveKey(ctx, opts)
	if err != nil {
		return err
	}
	return s.useKey(ctx, key, source)
}

// useKey makes key the state key, checked against the state, and starts
// the notifications.
func (s *Store) useKey(ctx context.Context, key []byte, source string) error {
	aead, err := newAEAD(key)
	clear(key)
	if err != nil {
		return err
	}
	s.aead, s.keySource = aead, source
	if err := s.checkKey(ctx); err != nil {
		return err
	}
	return s.startNotes(ctx)
}

// Close closes the database and stops the notifications. The Store and
// every view of it ([Store.ForUser]) must not be used afterwards.
func (s *Store) Close() error {
	s.notes.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Check runs a trivial query, for a health check: an error means the
// database does not answer (or not before ctx ends). It reads no record.
func (s *Store) Check(ctx context.Context) error {
	var one int
	if err := s.conn().queryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("store: the database does not answer: %w", err)
	}
	return nil
}

// KeySource says where the state key came from, for logs: "option"
// (Options.Key), "env" (POPPY_STATE_KEY), "keychain" or "file" (state.key).
func (s *Store) KeySource() string { return s.keySource }

// Dir returns the absolute state directory of a SQLite state, or "" for
// PostgreSQL.
func (s *Store) Dir() string { return s.dir }

// Where names the state for messages: its directory, or the PostgreSQL
// server and database it is in. It never holds a password.
func (s *Store) Where() string { return s.where }

// prepareDir creates dir with mode 0700, or tightens an existing one to it.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: state directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("store: state directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("store: state directory %s is not a directory", dir)
	}
	return tighten(dir, fi, 0o700)
}

// prepareFile creates the file at path with mode 0600 if it is missing, so
// that SQLite never creates it with the umask's mode, and tightens an
// existing one.
func prepareFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	f.Close()
	return tightenIfExists(path, 0o600)
}

// tightenIfExists removes from the file at path any permission bit outside
// max. A missing file is fine.
func tightenIfExists(path string, max fs.FileMode) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return tighten(path, fi, max)
}

func tighten(path string, fi fs.FileInfo, max fs.FileMode) error {
	if fi.Mode().Perm()&^max == 0 {
		return nil
	}
	if err := os.Chmod(path, fi.Mode().Perm()&max); err != nil {
		return fmt.Errorf("store: tighten permissions: %w", err)
	}
	return nil
}
