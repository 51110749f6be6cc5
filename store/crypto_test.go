package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawState returns the bytes the state at where keeps: SQLite's database
// file and its WAL, or what PostgreSQL returns of every row of the tables
// that hold values (read past the Store, as anyone with the database can).
func rawState(t *testing.T, b *backend, where string) []byte {
	t.Helper()
	if b == postgresBackend {
		var all []byte
		for _, q := range []string{`SELECT value FROM secrets`, `SELECT token FROM account_tokens`,
			`SELECT data FROM blobs`, `SELECT value FROM meta`} {
			rows, err := b.raw(t, where).Query(q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var v []byte
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				all = append(all, v...)
			}
			rows.Close()
		}
		return all
	}
	var all []byte
	for _, f := range []string{dbFileName, dbFileName + "-wal"} {
		b, err := os.ReadFile(filepath.Join(where, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func TestCiphertextAtRest(t *testing.T) { forEachBackend(t, testCiphertextAtRest) }

func testCiphertextAtRest(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	const secret, token = "PLAINTEXT-PRIVATE-KEY-d41d8cd9", "PLAINTEXT-ACCOUNT-TOKEN-8f00b204"
	const visible = "VISIBLE-BLOB-MARKER-e9800998"
	if err := s.PutSecret(ctx, "agent-key", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	if err := s.ForUser("alice").PutSecret(ctx, "dpop/x", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAccountToken(ctx, AccountToken{Issuer: "https://auth.example.com", UserID: "usr_a",
		Account: "personal", Token: NewSecretString(token)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(ctx, "b", "1", []byte(visible)); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		raw := rawState(t, b, where)
		// The scan can see plaintext: the blob, which is not encrypted, is there.
		if !bytes.Contains(raw, []byte(visible)) {
			t.Fatalf("%s: the unencrypted blob is not in the raw state; the scan is broken", when)
		}
		for _, p := range []string{secret, token} {
			if bytes.Contains(raw, []byte(p)) {
				t.Errorf("%s: plaintext %q found in the raw database", when, p)
			}
		}
	}
	check("open")
	s.Close() // checkpoints SQLite's WAL into the database file
	check("closed")
}

func TestWrongKey(t *testing.T) { forEachBackend(t, testWrongKey) }

func testWrongKey(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	if err := s.PutSecret(ctx, "agent-key", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	other := bytes.Repeat([]byte{0x17}, keySize)
	_, err := b.open(ctx, where, &Options{Key: other})
	if !errors.Is(err, ErrWrongKey) {
		t.Fatalf("Open with another key: err = %v, want ErrWrongKey", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "store: cannot decrypt ") ||
		!strings.HasSuffix(msg, "wrong state key?") || !strings.Contains(msg, "key from option") {
		t.Errorf("error %q does not say clearly what failed", msg)
	}
	// The right key still works: the failed Open changed nothing.
	if v, err := b.openAt(t, where, nil).Secret(ctx, "agent-key"); err != nil || string(v) != "v" {
		t.Errorf("Secret with the right key = %q, %v", v, err)
	}
}

func TestRecordsBoundToTheirRow(t *testing.T) { forEachBackend(t, testRecordsBoundToTheirRow) }

func testRecordsBoundToTheirRow(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	const iss = "https://auth.example.com"
	for _, name := range []string{"a", "b"} {
		if err := s.PutSecret(ctx, name, []byte("value of "+name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, acct := range []string{"personal", "business"} {
		if err := s.PutAccountToken(ctx, AccountToken{Issuer: iss, UserID: "usr_a", Account: acct,
			Token: NewSecretString("token of " + acct)}); err != nil {
			t.Fatal(err)
		}
	}
	db := b.raw(t, where)
	mustExec(t, db, `UPDATE secrets SET value = (SELECT value FROM secrets WHERE name = 'a') WHERE name = 'b'`)
	_, err := s.Secret(ctx, "b")
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), `cannot decrypt secret "b"`) {
		t.Errorf("Secret of a ciphertext copied from another name: err = %v, want ErrWrongKey", err)
	}
	if v, err := s.Secret(ctx, "a"); err != nil || string(v) != "value of a" {
		t.Errorf("Secret(a) = %q, %v", v, err)
	}

	// An Account Token moved to another account, or a secret put in its place.
	mustExec(t, db, `UPDATE account_tokens SET token = (SELECT token FROM account_tokens
		WHERE account = 'personal') WHERE account = 'business'`)
	if _, err := s.AccountToken(ctx, iss, "usr_a", "business"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("AccountToken moved between accounts: err = %v, want ErrWrongKey", err)
	}
	mustExec(t, db, `UPDATE account_tokens SET token = (SELECT value FROM secrets WHERE name = 'a')
		WHERE account = 'personal'`)
	if _, err := s.AccountTokens(ctx, iss, "usr_a"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("AccountTokens with a secret's ciphertext: err = %v, want ErrWrongKey", err)
	}
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

func TestRecordAADUnambiguous(t *testing.T) {
	// Parts are length-prefixed: moving a separator between parts changes
	// the additional data.
	a := recordAAD("account-token", "https://a/b", "c", "d")
	b := recordAAD("account-token", "https://a", "b/c", "d")
	c := recordAAD("secret", "account-token")
	if bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Error("recordAAD is ambiguous")
	}
}

// FuzzOpenSealed feeds arbitrary bytes to the decryption of a stored
// record: it must fail cleanly, never panic and never yield plaintext.
func FuzzOpenSealed(f *testing.F) {
	aead, err := newAEAD(testKey)
	if err != nil {
		f.Fatal(err)
	}
	aad := recordAAD("secret", "x")
	// A fixed nonce keeps the seed the same in every fuzz worker process.
	nonce := make([]byte, aead.NonceSize())
	valid := aead.Seal(append([]byte{sealVersion}, nonce...), nonce, []byte("hello"), aad)
	if _, err := openWith(aead, valid, aad, "seed"); err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte{})
	f.Add([]byte{sealVersion})
	f.Add(append([]byte{2}, valid[1:]...))
	f.Add(valid[:len(valid)-1])
	f.Fuzz(func(t *testing.T, sealed []byte) {
		plain, err := openWith(aead, sealed, aad, "fuzz")
		if err == nil && !bytes.Equal(sealed, valid) {
			t.Fatalf("forged ciphertext %x decrypted to %q", sealed, plain)
		}
		if err != nil && !errors.Is(err, ErrWrongKey) {
			t.Fatalf("err = %v, want ErrWrongKey", err)
		}
	})
}
