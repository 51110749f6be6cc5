package store

// This file holds what is particular to PostgreSQL: opening it through
// pgx (github.com/jackc/pgx/v5) behind database/sql, so the Store keeps one
// code path for both backends, the dialect and the schema's migrations.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgMaxOpenConns bounds the connections of one Store to PostgreSQL. The
// notifications use one more of their own (notify.go).
const pgMaxOpenConns = 10

// pgDialect is PostgreSQL's: $n placeholders, the server's clock (every
// replica asks the same one), and an advisory lock, per schema, around
// migrating.
var pgDialect = &dialect{
	name:       "postgres",
	numbered:   true,
	nowNanos:   "CAST(EXTRACT(EPOCH FROM now()) * 1000000000 AS BIGINT)",
	nextToken:  pgNextToken,
	migrations: pgMigrations,
	// Taken before the schema_version table is even created: two replicas
	// running CREATE TABLE IF NOT EXISTS at once can otherwise both try.
	lockMigrations: `SELECT pg_advisory_xact_lock(hashtextextended('poppy-mcp/store/migrate ' || current_schema(), 0))`,
	// Releases arrive as notifications; this covers one lost while the
	// listening connection was re-established.
	leaseRecheck: 2 * time.Second,
}

// OpenPostgres opens the state kept in the PostgreSQL database that dsn
// names (a postgres:// URL or key=value connection string, as libpq and
// pgx take it, including PGPASSWORD and the password file), creating or
// migrating its tables in the schema the connection's search_path selects
// (public by default). Every replica of a hosted deployment opens the same
// database, with the same state key: it must come from Options.Key or
// POPPY_STATE_KEY, and OpenPostgres fails with an error matching ErrNoKey
// without one, or ErrWrongKey when it is not the key the state was made
// with. The connection string is never repeated in an error or by
// [Store.Where].
func OpenPostgres(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := checkKeyOption(opts); err != nil {
		return nil, err
	}
	key, source, err := explicitKey(opts)
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, &keyError{"store: PostgreSQL state needs " + envKey + ", one 32-byte key in base64 shared by every replica " +
			"(make one with `head -c 32 /dev/urandom | base64` and keep it safe): a keychain or state.key belongs to one machine"}
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		clear(key)
		// pgx's message quotes the connection string, password masked at best.
		return nil, errors.New("store: not a PostgreSQL connection string (want postgres://USER@HOST[:PORT]/DATABASE[?PARAMS])")
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pgMaxOpenConns)
	db.SetMaxIdleConns(pgMaxOpenConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := newStore(db, pgDialect, opts)
	s.where, s.pgConfig = describePostgres(cfg), cfg
	if err := s.initPostgres(ctx, key, source); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) initPostgres(ctx context.Context, key []byte, source string) error {
	if err := s.db.PingContext(ctx); err != nil {
		clear(key)
		return fmt.Errorf("store: open %s: %w", s.where, err)
	}
	if err := migrate(ctx, s.db, s.d, s.now()); err != nil {
		clear(key)
		return err
	}
	return s.useKey(ctx, key, source)
}

// describePostgres names the database cfg connects to, for messages: the
// user, host, port, database and schema, never the password.
func describePostgres(cfg *pgx.ConnConfig) string {
	d := fmt.Sprintf("PostgreSQL database %q on %s:%d as %q", cfg.Database, cfg.Host, cfg.Port, cfg.User)
	if sp := cfg.RuntimeParams["search_path"]; sp != "" {
		d += fmt.Sprintf(", schema %q", sp)
	}
	return d
}

// DescribePostgres names the database dsn connects to, as Store.Where
// would once it is open: for messages, never with the password.
func DescribePostgres(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "PostgreSQL database (a connection string that does not parse)"
	}
	return describePostgres(cfg)
}

// IsPostgresURL reports whether s names a PostgreSQL database by URL
// (postgres:// or postgresql://), the form the --store flag takes.
func IsPostgresURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// pgMigrations is PostgreSQL's schema history (see dialect.migrations). It
// starts where SQLite's has arrived: every per-person table keyed by the
// local user. Text that is compared or sorted is COLLATE "C", byte order,
// as SQLite compares it, whatever the database's default collation. Times
// are Unix nanoseconds (0 for the zero time).
var pgMigrations = [][]string{
	{ // 1: the first schema
		`CREATE TABLE meta (
			name TEXT COLLATE "C" PRIMARY KEY,
			value BYTEA NOT NULL)`,
		`CREATE TABLE secrets (
			local_user TEXT COLLATE "C" NOT NULL,
			name TEXT COLLATE "C" NOT NULL,
			value BYTEA NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, name))`,
		`CREATE TABLE user_ids (
			local_user TEXT COLLATE "C" NOT NULL,
			issuer TEXT COLLATE "C" NOT NULL,
			user_id TEXT COLLATE "C" NOT NULL UNIQUE,
			created_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, issuer))`,
		`CREATE TABLE sessions (
			local_user TEXT COLLATE "C" NOT NULL,
			issuer TEXT COLLATE "C" NOT NULL,
			id TEXT COLLATE "C" NOT NULL,
			user_id TEXT NOT NULL,
			domain TEXT NOT NULL,
			account TEXT NOT NULL,
			signed_in BOOLEAN NOT NULL,
			scopes TEXT NOT NULL,
			expires_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, issuer, id))`,
		`CREATE INDEX sessions_by_time ON sessions (local_user, issuer, updated_at)`,
		`CREATE TABLE account_tokens (
			local_user TEXT COLLATE "C" NOT NULL,
			issuer TEXT COLLATE "C" NOT NULL,
			user_id TEXT COLLATE "C" NOT NULL,
			account TEXT COLLATE "C" NOT NULL,
			scopes TEXT NOT NULL,
			expires_at BIGINT NOT NULL,
			token BYTEA NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, issuer, user_id, account))`,
		`CREATE TABLE conversations (
			local_user TEXT COLLATE "C" NOT NULL,
			issuer TEXT COLLATE "C" NOT NULL,
			id TEXT COLLATE "C" NOT NULL,
			domain TEXT COLLATE "C" NOT NULL,
			user_id TEXT NOT NULL,
			account TEXT NOT NULL,
			parent_id TEXT NOT NULL,
			cursor TEXT NOT NULL,
			status TEXT NOT NULL,
			responder TEXT NOT NULL,
			closed BOOLEAN NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, issuer, id))`,
		`CREATE INDEX conversations_by_domain ON conversations (local_user, domain, closed, updated_at)`,
		`CREATE TABLE seen_events (
			local_user TEXT COLLATE "C" NOT NULL,
			issuer TEXT COLLATE "C" NOT NULL,
			conversation_id TEXT COLLATE "C" NOT NULL,
			event_id TEXT COLLATE "C" NOT NULL,
			seen_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, issuer, conversation_id, event_id))`,
		`CREATE TABLE blobs (
			name TEXT COLLATE "C" PRIMARY KEY,
			version TEXT NOT NULL,
			data BYTEA NOT NULL,
			updated_at BIGINT NOT NULL)`,
		`CREATE TABLE agent_metadata (
			id INTEGER PRIMARY KEY CHECK (id = 1),
			client_id TEXT NOT NULL,
			client_name TEXT NOT NULL,
			logo_uri TEXT NOT NULL,
			jwks_uri TEXT NOT NULL,
			redirect_uris TEXT NOT NULL,
			extensions TEXT NOT NULL,
			updated_at BIGINT NOT NULL)`,
		`CREATE TABLE leases (
			local_user TEXT COLLATE "C" NOT NULL,
			name TEXT COLLATE "C" NOT NULL,
			holder TEXT COLLATE "C" NOT NULL,
			expires_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, name))`,
	},
	migrationGenerations(`TEXT COLLATE "C"`),    // 2
	pgMigrationFencing,                          // 3
	migrationPages(`TEXT COLLATE "C"`, "BYTEA"), // 4
	migrationMCPSessions(`TEXT COLLATE "C"`),    // 5
}
