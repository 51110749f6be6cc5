package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zalando/go-keyring"
)

// memKeychain is an in-memory stand-in for the OS keychain (an OS service,
// not our protocol).
type memKeychain struct {
	mu   sync.Mutex
	m    map[string]string // service + "\x00" + user → secret
	gets int
}

func newMemKeychain() *memKeychain { return &memKeychain{m: map[string]string{}} }

func (k *memKeychain) Get(_ context.Context, service, user string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gets++
	v, ok := k.m[service+"\x00"+user]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

func (k *memKeychain) Set(_ context.Context, service, user, secret string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[service+"\x00"+user] = secret
	return nil
}

// hungKeychain never answers until its context ends, like a Secret Service
// waiting on an unlock prompt nobody sees.
type hungKeychain struct{}

func (hungKeychain) Get(ctx context.Context, _, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

func (hungKeychain) Set(ctx context.Context, _, _, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// putAndReopen stores a secret with the first options, reopens the
// directory with the second and checks that the secret still decrypts and
// the key came from want.
func putAndReopen(t *testing.T, dir string, first, second *Options, want string) {
	t.Helper()
	ctx := context.Background()
	s := openTest(t, dir, first)
	if s.KeySource() != want {
		t.Errorf("first Open: KeySource = %q, want %q", s.KeySource(), want)
	}
	if err := s.PutSecret(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, second)
	if s.KeySource() != want {
		t.Errorf("second Open: KeySource = %q, want %q", s.KeySource(), want)
	}
	if v, err := s.Secret(ctx, "k"); err != nil || string(v) != "v" {
		t.Errorf("Secret after reopen = %q, %v", v, err)
	}
}

func TestKeyFromEnv(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb}, keySize) // 0xfb makes base64 and base64url differ
	t.Setenv(envKey, base64.StdEncoding.EncodeToString(key))
	dir := t.TempDir()
	s := openTest(t, dir, &Options{})
	if err := s.PutSecret(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The same key in base64url without padding opens the same state.
	t.Setenv(envKey, base64.RawURLEncoding.EncodeToString(key)+"\n")
	putAndReopen(t, dir, &Options{}, &Options{}, "env")
	if _, err := os.Stat(filepath.Join(dir, keyFileName)); !os.IsNotExist(err) {
		t.Errorf("a key from the environment also wrote %s (err %v)", keyFileName, err)
	}
	// Options.Key comes before the environment.
	if s := openTest(t, t.TempDir(), &Options{Key: testKey}); s.KeySource() != "option" {
		t.Errorf("KeySource = %q with both Options.Key and %s, want option", s.KeySource(), envKey)
	}
}

func TestKeyFromEnvInvalid(t *testing.T) {
	const bad = "c2hvcnQta2V5LXNlY3JldA" // base64url of 16 bytes, not 32
	t.Setenv(envKey, bad)
	_, err := Open(context.Background(), t.TempDir(), &Options{Keychain: NoKeychain{}})
	if err == nil || !strings.Contains(err.Error(), envKey) || !errors.Is(err, ErrNoKey) {
		t.Fatalf("Open with a short %s: err = %v, want one matching ErrNoKey", envKey, err)
	}
	if strings.Contains(err.Error(), bad) {
		t.Errorf("error %q quotes the key", err)
	}
}

func TestKeyFromFile(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	putAndReopen(t, dir, &Options{}, &Options{}, "file")
	b, err := os.ReadFile(filepath.Join(dir, keyFileName))
	if err != nil || len(b) != keySize {
		t.Fatalf("%s: %d bytes, %v; want %d", keyFileName, len(b), err, keySize)
	}
	checkMode(t, filepath.Join(dir, keyFileName), 0o600)
	// The file's key is the state key: it works as Options.Key.
	if _, err := openTest(t, dir, &Options{Key: b}).Secret(context.Background(), "k"); err != nil {
		t.Errorf("the file's key does not open the state: %v", err)
	}
}

func TestKeyFromKeychain(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	kc := newMemKeychain()
	putAndReopen(t, dir, &Options{Keychain: kc}, &Options{Keychain: kc}, "keychain")
	if _, err := os.Stat(filepath.Join(dir, keyFileName)); !os.IsNotExist(err) {
		t.Errorf("a key in the keychain also wrote %s (err %v)", keyFileName, err)
	}
	if len(kc.m) != 1 {
		t.Errorf("keychain has %d entries, want 1", len(kc.m))
	}
	// A second state directory gets its own entry.
	openTest(t, t.TempDir(), &Options{Keychain: kc})
	if len(kc.m) != 2 {
		t.Errorf("keychain has %d entries after a second directory, want 2", len(kc.m))
	}
}

func TestKeychainThatHangsFallsThroughToFile(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	opts := func() *Options { return &Options{Keychain: hungKeychain{}, KeychainTimeout: 20 * time.Millisecond} }
	putAndReopen(t, dir, opts(), opts(), "file")
}

func TestKeyFileKeptWhenKeychainAppears(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	kc := newMemKeychain()
	putAndReopen(t, dir, &Options{Keychain: NoKeychain{}}, &Options{Keychain: kc}, "file")
	if kc.gets == 0 || len(kc.m) != 0 {
		t.Errorf("keychain: %d gets, %d entries; want it asked and left empty", kc.gets, len(kc.m))
	}
}

func TestMissingKeyIsNotReplaced(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	s := openTest(t, dir, &Options{})
	if err := s.PutSecret(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Remove(filepath.Join(dir, keyFileName)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), dir, &Options{Keychain: hungKeychain{}, KeychainTimeout: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "cannot be found") || !errors.Is(err, ErrNoKey) ||
		!strings.Contains(err.Error(), "keychain did not answer") {
		t.Fatalf("Open without the state key: err = %v, want a 'cannot be found' error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, keyFileName)); !os.IsNotExist(err) {
		t.Errorf("Open created a new %s for a state sealed with another key", keyFileName)
	}
}

func TestKeychainEntryInvalid(t *testing.T) {
	t.Setenv(envKey, "")
	kc := newMemKeychain()
	dir := t.TempDir()
	openTest(t, dir, &Options{Keychain: kc}).Close()
	for k := range kc.m {
		kc.m[k] = "not a key"
	}
	_, err := Open(context.Background(), dir, &Options{Keychain: kc})
	if err == nil || strings.Contains(err.Error(), "not a key") {
		t.Errorf("Open with a bad keychain entry: err = %v", err)
	}
}

func TestOptionsKeyLength(t *testing.T) {
	if _, err := Open(context.Background(), t.TempDir(), &Options{Key: make([]byte, 16)}); err == nil {
		t.Error("Open accepted a 16-byte Options.Key")
	}
}

// TestOSKeychainAnswersOrFallsThrough opens a state with the real OS
// keychain. Where there is none (CI, this Linux machine without a Secret
// Service) it must fall through to the file quickly; where there is one,
// the key goes there.
func TestOSKeychainAnswersOrFallsThrough(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("Open with the OS keychain: %v", err)
	}
	defer s.Close()
	t.Logf("OS keychain: key source %q", s.KeySource())
	switch s.KeySource() {
	case "file":
	case "keychain":
		id, err := s.storeID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteOSKeychainEntry("state-key/" + id) })
	default:
		t.Errorf("KeySource = %q, want file or keychain", s.KeySource())
	}
	if err := s.PutSecret(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Secret(context.Background(), "k"); err != nil || string(v) != "v" {
		t.Errorf("Secret = %q, %v", v, err)
	}
}

func deleteOSKeychainEntry(user string) { keyring.Delete(keychainService, user) }

// TestOSKeychainWithoutSecretService asks the real go-keyring over a session
// bus address where nothing listens: it must fail quickly with an error
// that is not ErrNotFound, so Open falls through to the file.
func TestOSKeychainWithoutSecretService(t *testing.T) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		t.Skip("the keychain is not D-Bus here")
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	ctx, cancel := context.WithTimeout(context.Background(), defaultKeychainTimeout)
	defer cancel()
	_, err := OSKeychain{}.Get(ctx, keychainService, "state-key/test")
	if err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Get without a bus: err = %v, want an unavailable error", err)
	}
	t.Logf("OS keychain without a bus: %v", err)
	t.Setenv(envKey, "")
	s := openTest(t, t.TempDir(), &Options{Keychain: OSKeychain{}})
	if s.KeySource() != "file" {
		t.Errorf("KeySource = %q, want file", s.KeySource())
	}
}

func TestNoSessionBusSkipsDBus(t *testing.T) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		t.Skip("the keychain is not D-Bus here")
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	if err := sessionBusMissing(); err == nil {
		t.Error("no bus address and no $XDG_RUNTIME_DIR/bus, but sessionBusMissing says fine")
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
	if err := sessionBusMissing(); err != nil {
		t.Errorf("with a bus address: %v", err)
	}
}
