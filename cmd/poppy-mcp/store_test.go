package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// postgresURL returns a postgres:// URL of a new schema in the database
// POPPY_TEST_POSTGRES names, dropped when the test ends, or skips the test
// (fails it with POPPY_REQUIRE_POSTGRES=1) without one.
func postgresURL(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("POPPY_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("POPPY_REQUIRE_POSTGRES") == "1" {
			t.Fatal("POPPY_REQUIRE_POSTGRES=1 but POPPY_TEST_POSTGRES names no database")
		}
		t.Skip("PostgreSQL not tested: set POPPY_TEST_POSTGRES to a DSN (scripts/pg-test-server.sh start prints one)")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("POPPY_TEST_POSTGRES: %v", err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	b := make([]byte, 8)
	rand.Read(b)
	schema := "cmd_" + hex.EncodeToString(b)
	mustExecSQL(t, db, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { mustExecSQL(t, db, "DROP SCHEMA "+schema+" CASCADE") })
	return pgURL(cfg, schema)
}

// pgURL is the postgres:// URL of the database cfg names, in schema (""
// for the default one).
func pgURL(cfg *pgx.ConnConfig, schema string) string {
	q := url.Values{"sslmode": {"disable"}}
	if schema != "" {
		q.Set("search_path", schema)
	}
	host := cfg.Host
	if filepath.IsAbs(host) { // a Unix socket's directory
		q.Set("host", host)
		host = ""
	} else {
		host = fmt.Sprintf("%s:%d", host, cfg.Port)
	}
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: host, Path: "/" + cfg.Database, RawQuery: q.Encode()}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return u.String()
}

// openPostgres opens the database at dbURL (from postgresURL), to read
// what the replicas wrote; it is closed when the test ends.
func openPostgres(t testing.TB, dbURL string) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExecSQL(t testing.TB, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// TestInitWithPostgresStore: `init --store postgres://...` keeps the
// identity in PostgreSQL (the signing key sealed under POPPY_STATE_KEY, the
// metadata init was given), so a second init, as another replica would
// run it, finds it there; the state directory gets no database.
func TestInitWithPostgresStore(t *testing.T) {
	t.Parallel()
	dbURL := postgresURL(t)
	key := newKey()
	env := []string{"POPPY_STATE_KEY=" + key}
	state, out := t.TempDir(), t.TempDir()
	args := []string{"init", "--store", dbURL, "--state-dir", state, "--out", out, "--client-id", "https://agent.example/agent.json"}
	if stdout, errOut, code := runBinary(t, env, append(args, "--redirect-uri", "https://agent.example/oauth/callback")...); code != 0 {
		t.Fatalf("init: exit %d: %s %s", code, stdout, errOut)
	}
	if stdout, errOut, code := runBinary(t, env, args...); code != 0 {
		t.Fatalf("second init: exit %d: %s %s", code, stdout, errOut)
	}
	var agent struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	readJSON(t, filepath.Join(out, "agent.json"), &agent)
	if !slices.Equal(agent.RedirectURIs, []string{"https://agent.example/oauth/callback"}) {
		t.Errorf("the second init did not find the first's metadata: redirect_uris %v", agent.RedirectURIs)
	}
	if _, err := os.Stat(filepath.Join(state, "state.db")); !os.IsNotExist(err) {
		t.Errorf("init --store made a SQLite state too (%v)", err)
	}
	raw, _ := base64.StdEncoding.DecodeString(key)
	st, err := store.OpenPostgres(context.Background(), dbURL, &store.Options{Key: raw})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Secret(context.Background(), "agent-key"); err != nil {
		t.Errorf("the signing key is not in PostgreSQL: %v", err)
	}
	// A replica started with another key is refused, and told what to do.
	_, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY=" + newKey()}, "serve", "--store", dbURL, "--state-dir", state)
	if code != 1 || !strings.Contains(errOut, "does not open the state in PostgreSQL database") ||
		!strings.Contains(errOut, "the same on every replica") {
		t.Errorf("serve with another key: exit %d, stderr %s", code, errOut)
	}
}
