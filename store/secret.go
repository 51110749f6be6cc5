package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
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

// secretAAD is the additional data of the secret called name.
func secretAAD(name string) []byte { return recordAAD("secret", name) }

// PutSecret stores value encrypted under name, replacing any secret of
// that name. Names are free-form; by convention "agent-key",
// "dpop/<issuer>/<user>", "account/<issuer>/<user>/<account>".
func (s *Store) PutSecret(ctx context.Context, name string, value []byte) error {
	if name == "" {
		return errors.New("store: empty secret name")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		name, s.seal(value, secretAAD(name)), unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put secret %q: %w", name, err)
	}
	return nil
}

// Secret returns the secret stored under name, or an error matching
// ErrNotFound. A secret that does not decrypt (another state key, a
// ciphertext copied from another row) gives an error matching ErrWrongKey.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	var sealed []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: secret %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: secret %q: %w", name, err)
	}
	return s.open(sealed, secretAAD(name), fmt.Sprintf("secret %q", name))
}

// DeleteSecret removes the secret stored under name. Deleting a missing
// secret is not an error.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE name = ?`, name); err != nil {
		return fmt.Errorf("store: delete secret %q: %w", name, err)
	}
	return nil
}
