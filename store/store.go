// Package store keeps the Personal Agent's persistent state: its keys, the
// User ID it gives each Company (Poppy 0.1 §4.2), Sessions, Account Tokens
// (§4.8), conversation cursors, seen event IDs and cached blobs, and leases:
// named locks every process sharing the state respects ([Store.AcquireLease]).
//
// The state lives in a SQLite database (modernc.org/sqlite, pure Go) in a
// state directory, by default [DefaultDir]. Several poppy-mcp processes may
// open the same directory at once, as assistants start several: the database
// runs in WAL mode with a busy timeout, and every get-or-create is atomic
// across processes.
//
// Secrets (private keys, Account Tokens, anything stored with
// [Store.PutSecret]) are encrypted at rest with AES-256-GCM under the state
// key, with the record's name as additional data so a ciphertext cannot be
// moved to another row. The state key comes from, in order, [Options.Key],
// the POPPY_STATE_KEY environment variable, the OS keychain, or the file
// state.key in the state directory. There is no plaintext fallback.
//
// The SQL that the Store's methods run is portable (ON CONFLICT upserts, no
// SQLite-only statements); what is particular to SQLite (the DSN, pragmas
// and column types of the schema) lives in sqlite.go.
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

// Options configure [Open]. A nil *Options is the same as a zero Options.
type Options struct {
	// Key is the 32-byte AES-256 state key. Nil: the key comes from the
	// environment variable POPPY_STATE_KEY, then the OS keychain, then the
	// file state.key in the state directory, created on first use.
	Key []byte

	// Now tells the time recorded in UpdatedAt fields. Nil: time.Now.
	Now func() time.Time

	// Keychain is the OS credential store asked for the state key when
	// neither Key nor POPPY_STATE_KEY gives one. Nil: the OS keychain
	// ([OSKeychain]). [NoKeychain] skips this step.
	Keychain Keychain

	// KeychainTimeout bounds each keychain call; a keychain that does not
	// answer in time is skipped. Zero: 3 s.
	KeychainTimeout time.Duration
}

// Store is the Personal Agent's persistent state in one state directory.
// It is safe for concurrent use by multiple goroutines, and several
// processes may open the same directory at once.
type Store struct {
	db        *sql.DB
	dir       string
	now       func() time.Time
	aead      cipher.AEAD
	keySource string
}

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

// Open opens the state in dir, creating the directory (mode 0700), the
// database (mode 0600) and the state key as needed, and applies any pending
// schema migrations. Looser permissions on an existing directory or
// database are tightened. Open fails if the state key does not decrypt the
// state already in dir.
func Open(ctx context.Context, dir string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if dir == "" {
		return nil, errors.New("store: empty state directory")
	}
	if opts.Key != nil && len(opts.Key) != keySize {
		return nil, fmt.Errorf("store: Options.Key has %d bytes, want %d", len(opts.Key), keySize)
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
	db, err := openDB(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: dir, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.init(ctx, dbPath, opts); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// init migrates the schema and sets up the state key.
func (s *Store) init(ctx context.Context, dbPath string, opts *Options) error {
	if err := migrate(ctx, s.db, s.now()); err != nil {
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
	aead, err := newAEAD(key)
	clear(key)
	if err != nil {
		return err
	}
	s.aead, s.keySource = aead, source
	return s.checkKey(ctx)
}

// Close closes the database. The Store must not be used afterwards.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// KeySource says where the state key came from, for logs: "option"
// (Options.Key), "env" (POPPY_STATE_KEY), "keychain" or "file" (state.key).
func (s *Store) KeySource() string { return s.keySource }

// Dir returns the absolute state directory.
func (s *Store) Dir() string { return s.dir }

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
