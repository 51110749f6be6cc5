package store

// The conformance suite: every test of the Store's behaviour runs once per
// backend, as the subtests "sqlite" (a temporary directory) and "postgres"
// (a fresh schema in the database POPPY_TEST_POSTGRES names; skipped with a
// message without it, a failure with POPPY_REQUIRE_POSTGRES=1).

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// backend is one database the suite runs on.
type backend struct {
	name string
	d    *dialect
	// fresh returns where a new, empty state can be opened: a directory,
	// or the DSN of a new schema. It is removed when the test ends.
	fresh func(t testing.TB) string
	// open opens the state at where.
	open func(ctx context.Context, where string, opts *Options) (*Store, error)
	// raw opens the state's database directly, bypassing the Store.
	raw func(t testing.TB, where string) *sql.DB
}

var sqliteBackend = &backend{
	name:  "sqlite",
	d:     sqliteDialect,
	fresh: func(t testing.TB) string { return t.TempDir() },
	open:  Open,
	raw: func(t testing.TB, dir string) *sql.DB {
		return openRaw(t, "sqlite", dsn(filepath.Join(dir, dbFileName)))
	},
}

var postgresBackend = &backend{
	name:  "postgres",
	d:     pgDialect,
	fresh: freshSchema,
	open:  OpenPostgres,
	raw:   func(t testing.TB, dsn string) *sql.DB { return openRaw(t, "pgx", dsn) },
}

var backends = []*backend{sqliteBackend, postgresBackend}

// forEachBackend runs f as a subtest on each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b *backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b == postgresBackend {
				postgresDSN(t)
			}
			f(t, b)
		})
	}
}

// openAt opens the state at where with testKey and no keychain unless opts
// says otherwise, and closes it when the test ends.
func (b *backend) openAt(t testing.TB, where string, opts *Options) *Store {
	t.Helper()
	if opts == nil {
		opts = &Options{Key: testKey}
	}
	if opts.Keychain == nil {
		opts.Keychain = NoKeychain{}
	}
	s, err := b.open(context.Background(), where, opts)
	if err != nil {
		t.Fatalf("open %s: %v", b.name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openNew opens a new, empty state.
func (b *backend) openNew(t testing.TB, opts *Options) *Store {
	t.Helper()
	return b.openAt(t, b.fresh(t), opts)
}

// exec runs a statement written with "?" placeholders on a raw database.
func (b *backend) exec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(b.d.rebind(q), args...); err != nil {
		t.Fatal(err)
	}
}

// openTest opens a SQLite Store in dir, for the tests of what only SQLite
// has (a state directory, key files, the keychain).
func openTest(t testing.TB, dir string, opts *Options) *Store {
	t.Helper()
	return sqliteBackend.openAt(t, dir, opts)
}

func openRaw(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// postgresDSN returns the DSN of the test database, or skips the test
// (fails it with POPPY_REQUIRE_POSTGRES=1) when there is none.
func postgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("POPPY_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("POPPY_REQUIRE_POSTGRES") == "1" {
			t.Fatal("POPPY_REQUIRE_POSTGRES=1 but POPPY_TEST_POSTGRES names no database")
		}
		t.Skip("PostgreSQL not tested: set POPPY_TEST_POSTGRES to a DSN (scripts/pg-test-server.sh start prints one)")
	}
	return dsn
}

// admin is one connection pool to the test database for the whole run,
// which makes and drops the tests' schemas.
var admin struct {
	once sync.Once
	db   *sql.DB
	err  error
}

func adminDB(t testing.TB) *sql.DB {
	t.Helper()
	dsn := postgresDSN(t)
	admin.once.Do(func() {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			admin.err = err
			return
		}
		admin.db = stdlib.OpenDB(*cfg)
		admin.db.SetMaxOpenConns(2)
		admin.err = admin.db.Ping()
	})
	if admin.err != nil {
		t.Fatalf("POPPY_TEST_POSTGRES: %v", admin.err)
	}
	return admin.db
}

// freshSchema makes a new schema in the test database, dropped when the
// test ends, and returns a DSN whose search_path selects it.
func freshSchema(t testing.TB) string {
	t.Helper()
	db := adminDB(t)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, postgresDSN(t), schema)
}

// withSearchPath adds search_path=schema to a URL or key=value DSN.
func withSearchPath(t testing.TB, dsn, schema string) string {
	if !IsPostgresURL(dsn) {
		return strings.TrimSpace(dsn) + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("POPPY_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
