package store

// This file holds what is particular to SQLite: the DSN with its pragmas,
// the dialect and the schema's migrations.

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
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

// sqliteDialect is SQLite's: "?" placeholders, the machine's clock (every
// process sharing the file shares it) with millisecond precision, and
// transactions that take the write lock at BEGIN (see dsn), which
// serialises migrating.
var sqliteDialect = &dialect{
	name:       "sqlite",
	nowNanos:   "CAST(unixepoch('subsec') * 1000000000 AS INTEGER)",
	nextToken:  sqliteNextToken,
	migrations: sqliteMigrations,
	// Releases in other processes are seen only by looking again.
	leaseRecheck: 100 * time.Millisecond,
}

// openSQLite opens and pings the database file at dbPath.
func openSQLite(ctx context.Context, dbPath string) (*sql.DB, error) {
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

// sqliteMigrations is SQLite's schema history (see dialect.migrations).
// Times are Unix nanoseconds (0 for the zero time); scopes are
// space-separated as in OAuth.
var sqliteMigrations = [][]string{
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
	migrationLeases,                // 3
	migrationLocalUsers,            // 4
	migrationGenerations("TEXT"),   // 5
	sqliteMigrationFencing,         // 6
	migrationPages("TEXT", "BLOB"), // 7
	migrationMCPSessions("TEXT"),   // 8
}

// migrationLeases adds the leases of lease.go: one row per lease, taken and
// given back in single statements.
var migrationLeases = []string{
	`CREATE TABLE leases (
		name TEXT PRIMARY KEY,
		holder TEXT NOT NULL,
		expires_at BIGINT NOT NULL)`,
}

// migrationLocalUsers keys every per-person table by the local user, so a
// hosted agent keeps people apart (Store.ForUser). SQLite cannot change a
// primary key in place: each table is rebuilt, and what it held goes to
// the default user "", the only one before.
var migrationLocalUsers = slices.Concat(
	rebuild("secrets", `local_user TEXT NOT NULL,
		name TEXT NOT NULL,
		value BLOB NOT NULL,
		updated_at BIGINT NOT NULL,
		PRIMARY KEY (local_user, name)`, "name, value, updated_at"),
	rebuild("user_ids", `local_user TEXT NOT NULL,
		issuer TEXT NOT NULL,
		user_id TEXT NOT NULL UNIQUE,
		created_at BIGINT NOT NULL,
		PRIMARY KEY (local_user, issuer)`, "issuer, user_id, created_at"),
	rebuild("sessions", `local_user TEXT NOT NULL,
		issuer TEXT NOT NULL,
		id TEXT NOT NULL,
		user_id TEXT NOT NULL,
		domain TEXT NOT NULL,
		account TEXT NOT NULL,
		signed_in INTEGER NOT NULL,
		scopes TEXT NOT NULL,
		expires_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		PRIMARY KEY (local_user, issuer, id)`,
		"issuer, id, user_id, domain, account, signed_in, scopes, expires_at, updated_at"),
	[]string{`CREATE INDEX sessions_by_time ON sessions (local_user, issuer, updated_at)`},
	rebuild("account_tokens", `local_user TEXT NOT NULL,
		issuer TEXT NOT NULL,
		user_id TEXT NOT NULL,
		account TEXT NOT NULL,
		scopes TEXT NOT NULL,
		expires_at BIGINT NOT NULL,
		token BLOB NOT NULL,
		updated_at BIGINT NOT NULL,
		PRIMARY KEY (local_user, issuer, user_id, account)`,
		"issuer, user_id, account, scopes, expires_at, token, updated_at"),
	rebuild("conversations", `local_user TEXT NOT NULL,
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
		PRIMARY KEY (local_user, issuer, id)`,
		"issuer, id, domain, user_id, account, parent_id, cursor, status, responder, closed, updated_at"),
	[]string{`CREATE INDEX conversations_by_domain ON conversations (local_user, domain, closed, updated_at)`},
	rebuild("seen_events", `local_user TEXT NOT NULL,
		issuer TEXT NOT NULL,
		conversation_id TEXT NOT NULL,
		event_id TEXT NOT NULL,
		seen_at BIGINT NOT NULL,
		PRIMARY KEY (local_user, issuer, conversation_id, event_id)`,
		"issuer, conversation_id, event_id, seen_at"),
	rebuild("leases", `local_user TEXT NOT NULL,
		name TEXT NOT NULL,
		holder TEXT NOT NULL,
		expires_at BIGINT NOT NULL,
		PRIMARY KEY (local_user, name)`, "name, holder, expires_at"),
)

// rebuild gives table the columns (with local_user first), keeping its rows
// for the default user. Its indexes go with the old table.
func rebuild(table, columns, kept string) []string {
	return []string{
		`CREATE TABLE ` + table + `_new (` + columns + `)`,
		`INSERT INTO ` + table + `_new (local_user, ` + kept + `) SELECT '', ` + kept + ` FROM ` + table,
		`DROP TABLE ` + table,
		`ALTER TABLE ` + table + `_new RENAME TO ` + table,
	}
}
