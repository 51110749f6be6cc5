package store

// This file holds what is particular to SQLite: the DSN with its pragmas and
// the schema's DDL. The statements elsewhere in the package are portable
// SQL (INSERT ... ON CONFLICT, standard SELECTs) apart from the "?"
// placeholder, which a PostgreSQL dialect would rebind to $n.

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// busyTimeoutMillis is how long a connection waits for another process's
// write lock before failing with "database is locked". It is well above the
// longest lock anyone holds: creating the state key may wait up to the
// keychain timeout (3 s) inside a transaction.
const busyTimeoutMillis = 15000

// maxOpenConns bounds the connections of one Store.
const maxOpenConns = 4

// dsn returns the modernc.org/sqlite data source name for the database file
// at the absolute path dbPath.
func dsn(dbPath string) string {
	q := url.Values{}
	// busy_timeout is applied first by the driver, so the journal_mode
	// change below waits for other processes instead of failing.
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	// WAL lets readers in every process run while one writes.
	q.Set("_journal_mode", "WAL")
	// NORMAL is durable across application crashes in WAL mode; a power
	// loss may lose the last transactions but never corrupts the file.
	q.Set("_synchronous", "NORMAL")
	// Every transaction the Store begins writes, so take the write lock
	// at BEGIN: a deferred transaction that upgrades later fails at once
	// with SQLITE_BUSY when another process wrote in between, and the busy
	// timeout cannot help it.
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(dbPath), RawQuery: q.Encode()}
	if filepath.VolumeName(dbPath) != "" {
		u.Path = "/" + u.Path // file:///C:/... on Windows
	}
	return u.String()
}

// openDB opens and pings the database file at dbPath.
func openDB(ctx context.Context, dbPath string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(dbPath))
	if err != nil {
		return nil, fmt.Errorf("store: open database: %w", err)
	}
	// Writers take turns anyway; a few connections let reads run beside a
	// write without opening one SQLite connection per waiting goroutine.
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open database %s: %w", dbPath, err)
	}
	return db, nil
}

// migrations is the schema, one numbered step per entry: migrations[i] takes
// the schema from version i to i+1. Never edit a step once released; append.
// Times are Unix nanoseconds (0 for the zero time); scopes are
// space-separated as in OAuth.
var migrations = [][]string{
	{ // 1: the first schema
		`CREATE TABLE meta (
			name TEXT PRIMARY KEY,
			value BLOB NOT NULL)`,
		`CREATE TABLE secrets (
			name TEXT PRIMARY KEY,
			value BLOB NOT NULL,
			updated_at BIGINT NOT NULL)`,
		`CREATE TABLE user_ids (
			issuer TEXT PRIMARY KEY,
			user_id TEXT NOT NULL UNIQUE,
			created_at BIGINT NOT NULL)`,
		`CREATE TABLE sessions (
			issuer TEXT NOT NULL,
			id TEXT NOT NULL,
			user_id TEXT NOT NULL,
			domain TEXT NOT NULL,
			account TEXT NOT NULL,
			signed_in INTEGER NOT NULL,
			scopes TEXT NOT NULL,
			expires_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (issuer, id))`,
		`CREATE INDEX sessions_by_time ON sessions (issuer, updated_at)`,
		`CREATE TABLE account_tokens (
			issuer TEXT NOT NULL,
			user_id TEXT NOT NULL,
			account TEXT NOT NULL,
			scopes TEXT NOT NULL,
			expires_at BIGINT NOT NULL,
			token BLOB NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (issuer, user_id, account))`,
		`CREATE TABLE conversations (
			issuer TEXT NOT NULL,
			id TEXT NOT NULL,
			domain TEXT NOT NULL,
			user_id TEXT NOT NULL,
			account TEXT NOT NULL,
			parent_id TEXT NOT NULL,
			cursor TEXT NOT NULL,
			status TEXT NOT NULL,
			responder TEXT NOT NULL,
			closed INTEGER NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (issuer, id))`,
		`CREATE INDEX conversations_by_domain ON conversations (domain, closed, updated_at)`,
		`CREATE TABLE seen_events (
			issuer TEXT NOT NULL,
			conversation_id TEXT NOT NULL,
			event_id TEXT NOT NULL,
			seen_at BIGINT NOT NULL,
			PRIMARY KEY (issuer, conversation_id, event_id))`,
		`CREATE TABLE blobs (
			name TEXT PRIMARY KEY,
			version TEXT NOT NULL,
			data BLOB NOT NULL,
			updated_at BIGINT NOT NULL)`,
	},
	{ // 2: the agent's client metadata, as `poppy-mcp init` was told it (one row)
		`CREATE TABLE agent_metadata (
			id INTEGER PRIMARY KEY CHECK (id = 1),
			client_id TEXT NOT NULL,
			client_name TEXT NOT NULL,
			logo_uri TEXT NOT NULL,
			jwks_uri TEXT NOT NULL,
			redirect_uris TEXT NOT NULL,
			extensions TEXT NOT NULL,
			updated_at BIGINT NOT NULL)`,
	},
	migrationLeases, // 3
}

// migrationLeases adds the leases of lease.go: one row per lease, taken and
// given back in single statements.
var migrationLeases = []string{
	`CREATE TABLE leases (
		name TEXT PRIMARY KEY,
		holder TEXT NOT NULL,
		expires_at BIGINT NOT NULL)`,
}

// migrate brings the schema up to date in one transaction. The transaction
// takes the write lock at BEGIN, so processes opening the same directory at
// once apply each step exactly once.
func migrate(ctx context.Context, db *sql.DB, now time.Time) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY,
		applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	var version int
	if err := tx.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("store: the state database has schema version %d, newer than this poppy-mcp knows (%d)",
			version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("store: migrate to version %d: %w", v+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, v+1, unixNano(now)); err != nil {
			return fmt.Errorf("store: migrate to version %d: %w", v+1, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}
