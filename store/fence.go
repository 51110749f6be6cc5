package store

// This file implements the fencing of leases. A holder can lose its lease
// without knowing it: paused (a long garbage collection, SIGSTOP, a
// stalled virtual machine) past the lease's expiry, it wakes while another
// holder does the same work, and whatever it writes then would overwrite
// the newer holder's. So each time a holder takes a lease from nobody or
// from another holder, the lease gets a fencing token, greater than every
// token given before in the state (a PostgreSQL sequence; on SQLite a
// counter row that triggers keep, so a token is never reused, even after
// the lease was released and its row deleted), and a write done under the
// lease goes through a fenced view of the Store ([Store.Fenced]): the
// write's own statement checks, by the database's clock, that the lease is
// still held under that token, and does nothing otherwise. There is no
// moment between the check and the write for the lease to change hands
// in. A fenced write that did nothing fails with an error matching
// ErrLeaseLost, and its caller stops.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// takeLease runs the statement that takes the lease name for holder, with
// cond (a WHERE clause of the upsert) saying when an existing row may be
// taken; sql.ErrNoRows when it may not. A holder that had the row already
// keeps its token; any other gets a new one.
func (s *Store) takeLease(ctx context.Context, name, holder string, ttl time.Duration, cond string) (Lease, error) {
	var expires, token int64
	err := s.conn().queryRow(ctx, s.d.now(`INSERT INTO leases (local_user, name, holder, expires_at, token)
		VALUES (?, ?, ?, NOW_NS + ?, `+s.d.nextToken+`)
		ON CONFLICT (local_user, name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
		token = CASE WHEN leases.holder = excluded.holder THEN leases.token ELSE excluded.token END
		`+cond+`
		RETURNING expires_at, token`), s.user, name, holder, ttl.Nanoseconds()).Scan(&expires, &token)
	if err != nil {
		return Lease{}, err
	}
	s.held.change(s.metrics, leaseKey(s.user, name)+"\x00"+holder, true)
	return Lease{Name: name, Holder: holder, ExpiresAt: fromUnixNano(expires), Token: token, user: s.user}, nil
}

// TakeLease gives holder the lease name for ttl from now whoever holds it:
// for work that supersedes the holder's (a new sign-in in place of the one
// another holder polls). The holder it is taken from loses it at once: its
// fenced writes fail, and its renewals find it lost.
func (s *Store) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if err := checkLease("take", name, holder, ttl); err != nil {
		return Lease{}, err
	}
	l, err := s.takeLease(ctx, name, holder, ttl, "")
	if err != nil {
		return Lease{}, fmt.Errorf("store: take lease %q: %w", name, err)
	}
	return l, nil
}

// Fenced returns a view of s whose writes are done only while l is held
// (see the file comment): PutSecret, DeleteSecret, PutAccountToken,
// DeleteAccountToken, AccountTokenUsed and PutSession each check, in their
// own statement, that l's holder still holds it under l's token and it
// has not expired, and fail with an error matching ErrLeaseLost when not.
// Reads are the same as s's. l is a lease taken through a view of the same
// local user; ForUser of the fenced view is not fenced.
func (s *Store) Fenced(l Lease) *Store {
	return &Store{state: s.state, user: s.user, fence: &l}
}

// fenceCond is the condition a fenced write adds to its statement: the
// lease is held by its holder under its token, by the database's clock.
const fenceCond = `EXISTS (SELECT 1 FROM leases WHERE local_user = ? AND name = ? AND holder = ? AND token = ? AND expires_at > NOW_NS)`

// fenced replaces the word FENCE in q, a write whose every other
// placeholder comes before it, with the view's fence condition (its
// arguments appended to args), or with a condition always true for a view
// that is not fenced.
func (s *Store) fenced(q string, args ...any) (string, []any) {
	if s.fence == nil {
		return strings.Replace(q, "FENCE", "1 = 1", 1), args
	}
	f := s.fence
	return s.d.now(strings.Replace(q, "FENCE", fenceCond, 1)), append(args, f.user, f.Name, f.Holder, f.Token)
}

// write runs the write q (with FENCE, see fenced) of this view. A fenced
// write that changed no row fails with an error matching ErrLeaseLost
// when the lease is lost; otherwise there was nothing to change. A lease
// once lost is never held again (its tokens are not reused), so looking
// after the write tells which.
func (s *Store) write(ctx context.Context, q string, args ...any) error {
	q, args = s.fenced(q, args...)
	res, err := s.conn().exec(ctx, q, args...)
	if err != nil || s.fence == nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	return s.CheckLease(ctx, *s.fence)
}

// CheckLease reports whether l is still held by its holder under its
// token and has not expired: nil when it is, an error matching
// ErrLeaseLost when not. It is for work outside the store that should not
// start once the lease is lost (a request a newer holder makes too); a
// write in the store is fenced instead ([Store.Fenced]), which leaves no
// moment between the check and the write.
func (s *Store) CheckLease(ctx context.Context, l Lease) error {
	var held bool
	err := s.conn().queryRow(ctx, s.d.now(`SELECT `+fenceCond), l.user, l.Name, l.Holder, l.Token).Scan(&held)
	switch {
	case err != nil:
		return fmt.Errorf("store: check lease %q: %w", l.Name, err)
	case !held:
		return fmt.Errorf("store: lease %q: %w", l.Name, ErrLeaseLost)
	}
	return nil
}

// migrationFencing gives each lease its fencing token. On SQLite, the
// counter row lease_tokens holds the greatest token given, kept by
// triggers in the same statement that gives one, deletes included; on
// PostgreSQL, the sequence lease_tokens gives them.
var (
	sqliteMigrationFencing = []string{
		`ALTER TABLE leases ADD COLUMN token BIGINT NOT NULL DEFAULT 0`,
		`CREATE TABLE lease_tokens (id INTEGER PRIMARY KEY CHECK (id = 1), last BIGINT NOT NULL)`,
		`INSERT INTO lease_tokens (id, last) VALUES (1, 0)`,
		`CREATE TRIGGER lease_token_inserted AFTER INSERT ON leases
			BEGIN UPDATE lease_tokens SET last = MAX(last, NEW.token) WHERE id = 1; END`,
		`CREATE TRIGGER lease_token_updated AFTER UPDATE OF token ON leases
			BEGIN UPDATE lease_tokens SET last = MAX(last, NEW.token) WHERE id = 1; END`,
	}
	pgMigrationFencing = []string{
		`ALTER TABLE leases ADD COLUMN token BIGINT NOT NULL DEFAULT 0`,
		`CREATE SEQUENCE lease_tokens`,
	}
)

// nextToken expressions give a new fencing token within a statement.
const (
	sqliteNextToken = `(SELECT last + 1 FROM lease_tokens WHERE id = 1)`
	pgNextToken     = `nextval('lease_tokens')`
)
