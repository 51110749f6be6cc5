package store

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestPostgresNeedsSharedKey: without Options.Key or POPPY_STATE_KEY,
// PostgreSQL is refused with one line saying what to do, before anything
// is connected to or created; with the key in the environment it opens.
func TestPostgresNeedsSharedKey(t *testing.T) {
	t.Setenv(envKey, "")
	_, err := OpenPostgres(context.Background(), "postgres://u:hunter2@db.invalid/poppy", &Options{})
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), envKey) ||
		!strings.Contains(err.Error(), "every replica") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("OpenPostgres without a key: %v; want one line matching ErrNoKey that names %s", err, envKey)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error quotes the password: %v", err)
	}

	postgresDSN(t)
	where := postgresBackend.fresh(t)
	t.Setenv(envKey, base64.StdEncoding.EncodeToString(testKey))
	s := postgresBackend.openAt(t, where, &Options{})
	if s.KeySource() != "env" {
		t.Errorf("KeySource = %q, want env", s.KeySource())
	}
	if s.Dir() != "" || !strings.HasPrefix(s.Where(), "PostgreSQL database ") || s.Where() != DescribePostgres(where) {
		t.Errorf("Dir = %q, Where = %q, DescribePostgres = %q", s.Dir(), s.Where(), DescribePostgres(where))
	}
	if d := DescribePostgres("postgres://u:hunter2@db.test:5433/poppy"); strings.Contains(d, "hunter2") ||
		!strings.Contains(d, `"poppy" on db.test:5433 as "u"`) {
		t.Errorf("DescribePostgres = %q", d)
	}
}

// TestPostgresConnectionStringNotRepeated: a connection string that does
// not parse, or a server that cannot be reached, gives an error without
// the password.
func TestPostgresConnectionStringNotRepeated(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{"postgres://u:hunter2@host:notaport/db", "host=/nonexistent/dir user=u password=hunter2 dbname=x connect_timeout=2"} {
		_, err := OpenPostgres(ctx, dsn, &Options{Key: testKey})
		if err == nil {
			t.Fatalf("OpenPostgres(%q) succeeded", dsn)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error quotes the password: %v", err)
		}
	}
}

func TestConcurrentOpen(t *testing.T) { forEachBackend(t, testConcurrentOpen) }

// testConcurrentOpen: replicas starting at once on a new state each apply
// every migration exactly once between them, and agree on the state.
func testConcurrentOpen(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	const replicas = 6
	var wg sync.WaitGroup
	stores := make([]*Store, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			stores[i], errs[i] = b.open(ctx, where, &Options{Key: testKey, Keychain: NoKeychain{}})
		})
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		t.Cleanup(func() { s.Close() })
		id, err := s.UserID(ctx, "https://auth.example.com")
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if len(ids) != 1 {
		t.Errorf("replicas disagree on a User ID: %v", ids)
	}
	var n int
	if err := b.raw(t, where).QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(b.d.migrations) {
		t.Errorf("schema_version has %d rows, want %d", n, len(b.d.migrations))
	}
}

func TestRebind(t *testing.T) {
	q := `INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT (a) DO UPDATE SET b = ? WHERE t.b <> ?`
	if got, want := pgDialect.rebind(q),
		`INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = $3 WHERE t.b <> $4`; got != want {
		t.Errorf("rebind = %s", got)
	}
	if sqliteDialect.rebind(q) != q {
		t.Error("SQLite's placeholders changed")
	}
}
