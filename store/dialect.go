package store

// This file is the seam between the portable SQL of the Store's methods and
// the two databases it runs on. The statements are written once, with "?"
// placeholders, INSERT ... ON CONFLICT upserts and RETURNING, which SQLite
// (3.35 and later) and PostgreSQL both accept; a dialect supplies what
// differs: the placeholder syntax, the database's clock, the schema's
// migrations and how migrating is serialised between processes.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// dialect is what differs between the databases a Store runs on.
type dialect struct {
	// name is "sqlite" or "postgres", for messages.
	name string
	// numbered says placeholders are $1, $2, ... rather than "?".
	numbered bool
	// nowNanos is an SQL expression of the database's clock in Unix
	// nanoseconds, the same for every use within one statement. Leases
	// compare with it, so that processes and replicas whose clocks
	// disagree still agree on who holds one.
	nowNanos string
	// nextToken is an SQL expression of a new lease fencing token
	// (fence.go), greater than every one given before in the state.
	nextToken string
	// migrations is the schema, one numbered step per entry: migrations[i]
	// takes the schema from version i to i+1. Each database has its own
	// history. Never edit a step once released; append.
	migrations [][]string
	// lockMigrations, when set, runs first in the migrating transaction and
	// holds until it ends, so that processes starting at once apply each
	// step exactly once. SQLite needs none: its transactions take the
	// write lock at BEGIN.
	lockMigrations string
	// leaseRecheck bounds how long WaitLease sleeps between two looks at a
	// held lease when no notification of its release arrives: releases in
	// other processes reach it only through the database on SQLite, and a
	// notification may be lost while PostgreSQL reconnects.
	leaseRecheck time.Duration
}

// rebind rewrites the "?" placeholders of q for d. No statement of the
// package has a "?" inside a string literal.
func (d *dialect) rebind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for _, c := range []byte(q) {
		if c != '?' {
			b.WriteByte(c)
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// execer is what both *sql.DB and *sql.Tx offer.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs the package's portable statements on a database or within a
// transaction, rebinding their placeholders for the dialect.
type conn struct {
	e execer
	d *dialect
	m *metrics.Recorder // counts failed statements; nil counts nothing
}

func (c conn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := c.e.ExecContext(ctx, c.d.rebind(q), args...)
	c.count(err)
	return res, err
}

func (c conn) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := c.e.QueryContext(ctx, c.d.rebind(q), args...)
	c.count(err)
	return rows, err
}

// count counts err as a store error, unless there is none or the caller
// gave up (a cancelled context is not the database's failure).
func (c conn) count(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		c.m.StoreError()
	}
}

func (c conn) queryRow(ctx context.Context, q string, args ...any) row {
	return row{r: c.e.QueryRowContext(ctx, c.d.rebind(q), args...), c: c}
}

// row is a *sql.Row whose Scan counts a failure (not sql.ErrNoRows) as a
// store error.
type row struct {
	r *sql.Row
	c conn
}

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if !errors.Is(err, sql.ErrNoRows) {
		r.c.count(err)
	}
	return err
}

// now replaces the word NOW_NS in q with the database's clock. The lease
// statements use it.
func (d *dialect) now(q string) string { return strings.ReplaceAll(q, "NOW_NS", d.nowNanos) }

// migrate brings the schema up to date in one transaction, which the
// dialect serialises between processes (lockMigrations, or SQLite's write
// lock at BEGIN), so processes opening the same state at once apply each
// step exactly once.
func migrate(ctx context.Context, db *sql.DB, d *dialect, now time.Time) error {
	return migrateTo(ctx, db, d, now, len(d.migrations))
}

// migrateTo applies the steps up to version target.
func migrateTo(ctx context.Context, db *sql.DB, d *dialect, now time.Time, target int) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	c := conn{e: tx, d: d}
	if d.lockMigrations != "" {
		if _, err := c.exec(ctx, d.lockMigrations); err != nil {
			return fmt.Errorf("store: migrate: lock: %w", err)
		}
	}
	if _, err := c.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY,
		applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	var version int
	if err := c.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if version > len(d.migrations) {
		return fmt.Errorf("store: the state database has schema version %d, newer than this poppy-mcp knows (%d)",
			version, len(d.migrations))
	}
	for v := version; v < target; v++ {
		for _, stmt := range d.migrations[v] {
			if _, err := c.exec(ctx, stmt); err != nil {
				return fmt.Errorf("store: migrate to version %d: %w", v+1, err)
			}
		}
		if _, err := c.exec(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`,
			v+1, unixNano(now)); err != nil {
			return fmt.Errorf("store: migrate to version %d: %w", v+1, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}
