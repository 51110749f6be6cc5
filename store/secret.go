package store

// This file holds the secrets: the redacting Secret type, encryption at rest
// with AES-256-GCM (NIST SP 800-38D), a random 96-bit nonce per record and
// the record's identity as additional authenticated data, and the secrets
// table.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
)

// redacted is what every printed or marshalled form of a Secret shows.
const redacted = "[REDACTED]"

// Secret holds secret bytes (a token, a private key) so that they cannot
// leak by accident: String, GoString, Format (every verb), MarshalJSON,
// MarshalText and LogValue all give "[REDACTED]". Reveal returns the bytes.
// The zero value is an empty secret. A Secret is immutable and safe for
// concurrent use.
type Secret struct {
	b []byte
}

// NewSecret returns a Secret holding a copy of b.
func NewSecret(b []byte) Secret {
	if len(b) == 0 {
		return Secret{}
	}
	return Secret{b: append([]byte(nil), b...)}
}

// NewSecretString returns a Secret holding the bytes of s.
func NewSecretString(s string) Secret { return NewSecret([]byte(s)) }

// Reveal returns a copy of the secret bytes. Never log or print them.
func (s Secret) Reveal() []byte {
	if len(s.b) == 0 {
		return nil
	}
	return append([]byte(nil), s.b...)
}

// RevealString returns the secret as a string. Never log or print it.
func (s Secret) RevealString() string { return string(s.b) }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return len(s.b) == 0 }

// Equal reports whether s and t hold the same bytes, in constant time for
// equal lengths.
func (s Secret) Equal(t Secret) bool { return subtle.ConstantTimeCompare(s.b, t.b) == 1 }

// String returns "[REDACTED]".
func (Secret) String() string { return redacted }

// GoString returns "[REDACTED]".
func (Secret) GoString() string { return redacted }

// Format prints "[REDACTED]" for every verb, so %x, %q and %#v reveal
// nothing either.
func (Secret) Format(f fmt.State, _ rune) { f.Write([]byte(redacted)) }

// MarshalJSON returns the JSON string "[REDACTED]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText returns "[REDACTED]".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue makes log/slog print "[REDACTED]".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// UnmarshalJSON reads a JSON string into the secret, so wire structs (a
// token response's refresh_token) can hold a Secret directly. JSON null
// leaves s unchanged. The error never quotes the input.
func (s *Secret) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var v string
	if err := json.Unmarshal(data, &v); err != nil {
		return errors.New("store: a Secret must be a JSON string")
	}
	*s = NewSecretString(v)
	return nil
}

// secretAAD is the additional data of the local user's secret called name.
func (s *Store) secretAAD(name string) []byte { return s.userAAD("secret", name) }

// userAAD is the additional data of a record of s's local user: for anyone
// but the default user, the local user key is its last part, so a
// ciphertext moved to another person's row does not decrypt. The default
// user's records are sealed as they were before people were kept apart.
func (s *Store) userAAD(kind string, parts ...string) []byte {
	if s.user != "" {
		parts = append(parts[:len(parts):len(parts)], s.user)
	}
	return recordAAD(kind, parts...)
}

// PutSecret stores value encrypted under name for the local user,
// replacing any secret of theirs of that name. Names are free-form; by
// convention "agent-key" (the default user's only), "dpop/<issuer>/<user>",
// "conversation/pending/<issuer>/<user>/<id>".
func (s *Store) PutSecret(ctx context.Context, name string, value []byte) error {
	if name == "" {
		return errors.New("store: empty secret name")
	}
	err := s.write(ctx, `INSERT INTO secrets (local_user, name, value, updated_at) SELECT ?, ?, ?, ? WHERE FENCE
		ON CONFLICT (local_user, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		s.user, name, s.seal(value, s.secretAAD(name)), unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put secret %q: %w", name, err)
	}
	return nil
}

// Secret returns the local user's secret stored under name, or an error matching
// ErrNotFound. A secret that does not decrypt (another state key, a
// ciphertext copied from another row) gives an error matching ErrWrongKey.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	var sealed []byte
	err := s.conn().queryRow(ctx, `SELECT value FROM secrets WHERE local_user = ? AND name = ?`,
		s.user, name).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(fmt.Sprintf("secret %q", name))
	}
	if err != nil {
		return nil, fmt.Errorf("store: secret %q: %w", name, err)
	}
	return s.open(sealed, s.secretAAD(name), fmt.Sprintf("secret %q", name))
}

// SecretNames returns the names of the local user's secrets that begin with prefix, in
// order, so that a kind of secret kept under one prefix (the messages not
// yet known delivered, say) can be found again after a restart.
func (s *Store) SecretNames(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.conn().query(ctx, `SELECT name FROM secrets
		WHERE local_user = ? AND substr(name, 1, length(?)) = ? ORDER BY name`, s.user, prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("store: secret names: %w", err)
	}
	return collect(rows, func(row interface{ Scan(...any) error }) (string, error) {
		var name string
		return name, row.Scan(&name)
	}, "secret names")
}

// SecretHolders returns, in order, the local users (of every view: the
// whole state) that keep a secret whose name begins with prefix, so that
// work kept per person under one prefix (device sign-ins in progress, say)
// is found with one query, not one per person.
func (s *Store) SecretHolders(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.conn().query(ctx, `SELECT DISTINCT local_user FROM secrets
		WHERE substr(name, 1, length(?)) = ? ORDER BY local_user`, prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("store: secret holders: %w", err)
	}
	return collect(rows, scanString, "secret holders")
}

// DeleteSecret removes the local user's secret stored under name. Deleting
// a missing secret is not an error.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	if err := s.write(ctx, `DELETE FROM secrets WHERE local_user = ? AND name = ? AND FENCE`, s.user, name); err != nil {
		return fmt.Errorf("store: delete secret %q: %w", name, err)
	}
	return nil
}

// keySize is the length of the AES-256 state key.
const keySize = 32

// sealVersion is the first byte of every sealed value, so the format can
// change later without guessing.
const sealVersion = 1

// ErrWrongKey is matched (with errors.Is) by every failure to decrypt a
// record: the state key is not the one the record was encrypted with, or
// the record was altered or moved to another row.
var ErrWrongKey = errors.New("store: wrong state key")

// decryptError says which record could not be decrypted. It never holds
// any part of the ciphertext or plaintext.
type decryptError struct{ what string }

func (e *decryptError) Error() string {
	return "store: cannot decrypt " + e.what + ": wrong state key?"
}

func (e *decryptError) Is(target error) bool { return target == ErrWrongKey }

func isDecryptError(err error) bool {
	var de *decryptError
	return errors.As(err, &de)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("store: state key has %d bytes, want %d", len(key), keySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return aead, nil
}

// recordAAD binds a ciphertext to the record it belongs to: the kind of
// record and the parts of its key, each length-prefixed so that no two
// different records share additional data (names may contain any byte).
func recordAAD(kind string, parts ...string) []byte {
	b := []byte("poppy-mcp/store\x00")
	b = append(b, sealVersion)
	b = binary.AppendUvarint(b, uint64(len(kind)))
	b = append(b, kind...)
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// sealWith encrypts plaintext as version || nonce || ciphertext+tag.
func sealWith(aead cipher.AEAD, plaintext, aad []byte) []byte {
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out[0] = sealVersion
	rand.Read(out[1:]) // crypto/rand.Read never fails (Go 1.24+)
	return aead.Seal(out, out[1:1+aead.NonceSize()], plaintext, aad)
}

// openWith decrypts what sealWith made, or fails with a *decryptError
// naming what.
func openWith(aead cipher.AEAD, sealed, aad []byte, what string) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < 1+n+aead.Overhead() || sealed[0] != sealVersion {
		return nil, &decryptError{what: what}
	}
	plain, err := aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad)
	if err != nil {
		return nil, &decryptError{what: what}
	}
	return plain, nil
}

func (s *Store) seal(plaintext, aad []byte) []byte { return sealWith(s.aead, plaintext, aad) }

func (s *Store) open(sealed, aad []byte, what string) ([]byte, error) {
	return openWith(s.aead, sealed, aad, what)
}

// keyCheckPlaintext is sealed under the state key into the meta row
// "key_check" when the state gets its key, so that opening the state with
// another key fails at Open rather than record by record.
const keyCheckPlaintext = "poppy-mcp state key check"

// Names of rows in the meta table.
const (
	metaKeyCheck = "key_check"
	metaStoreID  = "store_id"
)

// checkKey verifies the state key against the key check, recording one if
// the state has none yet. Of processes racing here, the first insert wins
// and the others verify against it.
func (s *Store) checkKey(ctx context.Context) error {
	what := "the state in " + s.where + " with the key from " + s.keySource
	aad := recordAAD("key-check")
	sealed, err := metaValue(ctx, s.conn(), metaKeyCheck)
	if errors.Is(err, ErrNotFound) {
		_, err = s.conn().exec(ctx,
			`INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			metaKeyCheck, s.seal([]byte(keyCheckPlaintext), aad))
		if err != nil {
			return fmt.Errorf("store: key check: %w", err)
		}
		sealed, err = metaValue(ctx, s.conn(), metaKeyCheck)
	}
	if err != nil {
		return err
	}
	plain, err := s.open(sealed, aad, what)
	if err != nil {
		return err
	}
	if string(plain) != keyCheckPlaintext {
		return &decryptError{what: what}
	}
	return nil
}

// metaValue returns the value of a meta row, or ErrNotFound.
func metaValue(ctx context.Context, c conn, name string) ([]byte, error) {
	var v []byte
	err := c.queryRow(ctx, `SELECT value FROM meta WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: meta %s: %w", name, err)
	}
	return v, nil
}
