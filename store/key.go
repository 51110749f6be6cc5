package store

// This file finds or creates the state key: Options.Key, then
// POPPY_STATE_KEY, then the OS keychain, then the file state.key.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/zalando/go-keyring"
)

const (
	// envKey names the environment variable that may hold the state key,
	// as base64 or base64url (padded or not) of 32 bytes.
	envKey = "POPPY_STATE_KEY"
	// keychainService is the service name of the keychain entry; its user
	// name is "state-key/" and the state's random store ID, so that every
	// state directory has its own entry and moving the directory keeps it.
	keychainService        = "poppy-mcp"
	defaultKeychainTimeout = 3 * time.Second
)

// Key sources reported by [Store.KeySource].
const (
	sourceOption   = "option"
	sourceEnv      = "env"
	sourceKeychain = "keychain"
	sourceFile     = "file"
)

// Keychain is an OS credential store that can hold the state key.
// Implementations must be safe for concurrent use.
type Keychain interface {
	// Get returns the secret stored for service and user, or an error
	// matching ErrNotFound when the keychain answers that there is none.
	// Any other error means the keychain is unavailable.
	Get(ctx context.Context, service, user string) (string, error)
	// Set stores secret for service and user, replacing any.
	Set(ctx context.Context, service, user, secret string) error
}

// OSKeychain is the operating system's keychain through
// github.com/zalando/go-keyring: the macOS Keychain, the Windows Credential
// Manager, or the Secret Service over D-Bus. Where none answers (a Linux
// machine without a session bus) its calls fail quickly. A call that hangs
// is abandoned when ctx ends and finishes in the background. The zero value
// is ready to use and safe for concurrent use.
type OSKeychain struct{}

// Get implements [Keychain].
func (OSKeychain) Get(ctx context.Context, service, user string) (string, error) {
	if err := sessionBusMissing(); err != nil {
		return "", err
	}
	return withContext(ctx, func() (string, error) {
		v, err := keyring.Get(service, user)
		if errors.Is(err, keyring.ErrNotFound) {
			return "", ErrNotFound
		}
		if err != nil {
			return "", fmt.Errorf("store: keychain: %w", err)
		}
		return v, nil
	})
}

// Set implements [Keychain].
func (OSKeychain) Set(ctx context.Context, service, user, secret string) error {
	if err := sessionBusMissing(); err != nil {
		return err
	}
	_, err := withContext(ctx, func() (struct{}, error) {
		return struct{}{}, keyring.Set(service, user, secret)
	})
	if err != nil {
		return fmt.Errorf("store: keychain: %w", err)
	}
	return nil
}

// sessionBusMissing reports, where the keychain is the Secret Service over
// D-Bus, that there is no session bus to ask. Without this check godbus
// would run dbus-launch and leave a stray dbus-daemon behind on a machine
// that has one installed but no desktop session.
func sessionBusMissing() error {
	switch runtime.GOOS {
	case "darwin", "windows", "ios", "android":
		return nil
	}
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		return nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "bus")); err == nil {
			return nil
		}
	}
	return errors.New("store: keychain: no D-Bus session bus")
}

// withContext runs f, returning early with ctx's error when ctx ends first.
func withContext[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// NoKeychain is a [Keychain] that is never available, for [Options.Keychain]
// when the OS keychain must not be used (tests, servers). It is safe for
// concurrent use.
type NoKeychain struct{}

var errNoKeychain = errors.New("store: keychain disabled")

// Get implements [Keychain]; it always fails.
func (NoKeychain) Get(context.Context, string, string) (string, error) { return "", errNoKeychain }

// Set implements [Keychain]; it always fails.
func (NoKeychain) Set(context.Context, string, string, string) error { return errNoKeychain }

// keyFinder looks for the state key in the keychain and the key file.
type keyFinder struct {
	kc      Keychain
	timeout time.Duration
	user    string // keychain user name
	path    string // key file
	dir     string
}

// found is what keyFinder.find learned: the key and its source, or whether
// the keychain answered (so a new key can go there) and why not.
type found struct {
	key        []byte
	source     string
	kcAnswered bool
	kcFailure  error
}

// resolveKey returns the state key and its source, creating a key on the
// first Open of a directory when no source has one.
func (s *Store) resolveKey(ctx context.Context, opts *Options) ([]byte, string, error) {
	if key, source, err := explicitKey(opts); err != nil || key != nil {
		return key, source, err
	}
	id, err := s.storeID(ctx)
	if err != nil {
		return nil, "", err
	}
	kf := &keyFinder{kc: opts.Keychain, timeout: opts.KeychainTimeout, user: "state-key/" + id,
		path: filepath.Join(s.dir, keyFileName), dir: s.dir}
	if kf.kc == nil {
		kf.kc = OSKeychain{}
	}
	if kf.timeout <= 0 {
		kf.timeout = defaultKeychainTimeout
	}
	f, err := kf.find(ctx)
	if err != nil || f.key != nil {
		return f.key, f.source, err
	}
	return s.createKey(ctx, kf)
}

// explicitKey returns the key Options.Key or POPPY_STATE_KEY gives, and its
// source, or a nil key when neither gives one.
func explicitKey(opts *Options) ([]byte, string, error) {
	if opts.Key != nil {
		return bytes.Clone(opts.Key), sourceOption, nil
	}
	if v := os.Getenv(envKey); v != "" {
		key, err := decodeKey(v)
		if err != nil {
			return nil, "", &keyError{fmt.Sprintf("store: %s must be base64 or base64url of %d bytes", envKey, keySize)}
		}
		return key, sourceEnv, nil
	}
	return nil, "", nil
}

// find looks in the keychain, then in the key file.
func (kf *keyFinder) find(ctx context.Context) (found, error) {
	var f found
	kctx, cancel := context.WithTimeout(ctx, kf.timeout)
	v, err := kf.kc.Get(kctx, keychainService, kf.user)
	cancel()
	switch {
	case err == nil:
		key, err := decodeKey(v)
		if err != nil {
			return f, fmt.Errorf("store: the keychain entry %s/%s is not a %d-byte state key",
				keychainService, kf.user, keySize)
		}
		return found{key: key, source: sourceKeychain}, nil
	case errors.Is(err, ErrNotFound):
		f.kcAnswered = true
	case ctx.Err() != nil:
		return f, fmt.Errorf("store: state key: %w", ctx.Err())
	default:
		f.kcFailure = err // unavailable or too slow: fall through to the file
	}
	key, err := readKeyFile(kf.path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	f.key, f.source = key, sourceFile
	return f, nil
}

// createKey makes a new state key, in the keychain if it answered, else in
// the key file. It runs in a write transaction so that processes opening a
// new directory at once serialize here: the first creates the key, the
// others find it. It refuses to create a key for a state that already has
// a key check, since that state's secrets were sealed with a key that is
// missing now (a keychain that did not answer, a deleted state.key).
func (s *Store) createKey(ctx context.Context, kf *keyFinder) (key []byte, source string, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, "", fmt.Errorf("store: create state key: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	f, err := kf.find(ctx)
	if err != nil {
		return nil, "", err
	}
	if f.key != nil {
		return f.key, f.source, tx.Commit()
	}
	if _, err := metaValue(ctx, conn{e: tx, d: s.d, m: s.metrics}, metaKeyCheck); !errors.Is(err, ErrNotFound) {
		return nil, "", missingKeyError(kf, f, err)
	}
	key = make([]byte, keySize)
	rand.Read(key)
	source = sourceFile
	if f.kcAnswered && kf.set(ctx, key) == nil {
		source = sourceKeychain
	}
	if source == sourceFile {
		if key, err = writeKeyFile(kf.dir, kf.path, key); err != nil {
			return nil, "", err
		}
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, "", err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`,
		metaKeyCheck, sealWith(aead, []byte(keyCheckPlaintext), recordAAD("key-check"))); err != nil {
		return nil, "", fmt.Errorf("store: create state key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, "", fmt.Errorf("store: create state key: %w", err)
	}
	return key, source, nil
}

func (kf *keyFinder) set(ctx context.Context, key []byte) error {
	ctx, cancel := context.WithTimeout(ctx, kf.timeout)
	defer cancel()
	return kf.kc.Set(ctx, keychainService, kf.user, base64.RawURLEncoding.EncodeToString(key))
}

func missingKeyError(kf *keyFinder, f found, err error) error {
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("store: the state in %s is encrypted with a key that cannot be found now "+
		"(no %s, no keychain entry %s/%s, no %s)", kf.dir, envKey, keychainService, kf.user, keyFileName)
	if f.kcFailure != nil {
		msg += fmt.Sprintf("; the keychain did not answer: %v", f.kcFailure)
	}
	return &keyError{msg}
}

// ErrNoKey is matched (with errors.Is) by the error of Open when there is no
// usable state key: POPPY_STATE_KEY is not a key, or the state was sealed
// with a key that cannot be found now. A key that is found but does not
// decrypt the state gives ErrWrongKey instead.
var ErrNoKey = errors.New("store: no usable state key")

// keyError is an error matching ErrNoKey.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }

func (e *keyError) Is(target error) bool { return target == ErrNoKey }

// decodeKey accepts base64 or base64url, padded or not, of keySize bytes.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding,
		base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == keySize {
			return b, nil
		}
	}
	return nil, errors.New("store: not a base64 state key")
}

// readKeyFile reads the raw key file, tightening its mode to 0600.
func readKeyFile(path string) ([]byte, error) {
	if err := tightenIfExists(path, 0o600); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("store: state key file: %w", err)
	}
	if len(b) != keySize {
		return nil, fmt.Errorf("store: state key file %s has %d bytes, want %d", path, len(b), keySize)
	}
	return b, nil
}

// writeKeyFile publishes key at path atomically with mode 0600: it writes a
// temporary file and links it into place, which fails if path exists. If
// another process won the race, its key is returned instead.
func writeKeyFile(dir, path string, key []byte) ([]byte, error) {
	tmp, err := os.CreateTemp(dir, ".state.key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("store: state key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: state key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readKeyFile(path)
	} else if err != nil {
		return nil, fmt.Errorf("store: state key file: %w", err)
	}
	return key, nil
}

// storeID returns the state's random ID, creating it on first use.
func (s *Store) storeID(ctx context.Context) (string, error) {
	id := make([]byte, 16)
	rand.Read(id)
	if _, err := s.conn().exec(ctx,
		`INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
		metaStoreID, []byte(base64.RawURLEncoding.EncodeToString(id))); err != nil {
		return "", fmt.Errorf("store: store ID: %w", err)
	}
	v, err := metaValue(ctx, s.conn(), metaStoreID)
	return string(v), err
}
