package store

// This file keeps what the person's own commands (poppy-mcp status,
// sign-out and forget) need beyond the records themselves: which Companies
// the local user holds anything at, and a generation per Company that every
// process holding a Session there reads before using it, so that a sign-out
// or a forget done by another process (or replica) takes effect before that
// process's next request. Notifications cannot carry this: on SQLite they do
// not leave the process, and on PostgreSQL they are at most once; a row read
// by primary key is both certain and cheap.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Generation counts what ended at a Company for the local user, so that a
// process holding a Session there notices what another process did. Each
// count only grows.
type Generation struct {
	// SignOuts counts sign-outs: each time the Account Tokens held there
	// were revoked or deleted (Poppy 0.1 §4.9), so a Session signed in with
	// one must continue signed out.
	SignOuts int64
	// Unrevoked counts the sign-outs whose Account Token was deleted
	// without the Company revoking it: Sessions signed in with it are still
	// signed in there, and must be left for new signed-out ones rather than
	// renewed (§4.2: "A signed-in Session is renewed with the Account Token
	// instead").
	Unrevoked int64
	// Forgets counts forgets ([Store.Forget]): everything held there, the
	// User ID included, was deleted, so a Session there must not be used
	// again.
	Forgets int64
}

// Generation returns the local user's generation at issuer; the zero
// Generation when nothing ever ended there.
func (s *Store) Generation(ctx context.Context, issuer string) (Generation, error) {
	var g Generation
	err := s.conn().queryRow(ctx, `SELECT `+generationColumns+` FROM generations WHERE local_user = ? AND issuer = ?`,
		s.user, issuer).Scan(&g.SignOuts, &g.Unrevoked, &g.Forgets)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Generation{}, fmt.Errorf("store: generation at %s: %w", issuer, err)
	}
	return g, nil
}

const generationColumns = `sign_outs, unrevoked, forgets`

// CountSignOut records a sign-out at issuer for the local user, revoked
// at the Company or not, and returns the new generation. Call it once the
// Account Tokens are gone from the store, so that a process that notices
// it finds them gone.
func (s *Store) CountSignOut(ctx context.Context, issuer string, revoked bool) (Generation, error) {
	add := Generation{SignOuts: 1}
	if !revoked {
		add.Unrevoked = 1
	}
	return s.count(ctx, s.conn(), issuer, add)
}

// count adds add to the local user's generation at issuer, through c, and
// returns the new generation.
func (s *Store) count(ctx context.Context, c conn, issuer string, add Generation) (Generation, error) {
	if issuer == "" {
		return Generation{}, errors.New("store: generation: empty issuer")
	}
	var g Generation
	err := c.queryRow(ctx, `INSERT INTO generations (local_user, issuer, `+generationColumns+`, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (local_user, issuer) DO UPDATE SET sign_outs = generations.sign_outs + excluded.sign_outs,
		unrevoked = generations.unrevoked + excluded.unrevoked, forgets = generations.forgets + excluded.forgets,
		updated_at = excluded.updated_at
		RETURNING `+generationColumns, s.user, issuer, add.SignOuts, add.Unrevoked, add.Forgets, unixNano(s.now())).
		Scan(&g.SignOuts, &g.Unrevoked, &g.Forgets)
	if err != nil {
		return Generation{}, fmt.Errorf("store: count at %s: %w", issuer, err)
	}
	return g, nil
}

// Forgotten is what [Store.Forget] deleted.
type Forgotten struct {
	// UserID is the User ID the local user had at the Company; "" when
	// there was none.
	UserID        string
	Sessions      int
	AccountTokens int
	Conversations int
	// SeenEvents are the events marked seen and the IDs of the messages sent.
	SeenEvents int
	// Secrets are the DPoP keys, the messages not yet known delivered and
	// the device sign-in kept.
	Secrets int
	// Generation is the local user's generation at the Company afterwards.
	Generation Generation
}

// Forget deletes everything the local user holds at the Company issuer, in
// one transaction: the User ID (so the Company sees a new User next time,
// Poppy 0.1 §4.2), Sessions, Account Tokens, conversations with their
// cursors, seen events and sent message IDs, the secrets kept for the User
// there (DPoP keys "dpop/ISSUER/...", messages not yet known delivered
// "conversation/pending/ISSUER/..."), and leases left over; and it counts a
// forget in the generation, so that processes holding a Session there stop
// using it. Shared records (blobs, the agent's keys) are not touched.
// Revoke the Account Tokens at the Company first.
func (s *Store) Forget(ctx context.Context, issuer string) (Forgotten, error) {
	if issuer == "" {
		return Forgotten{}, errors.New("store: forget: empty issuer")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Forgotten{}, fmt.Errorf("store: forget %s: %w", issuer, err)
	}
	defer tx.Rollback()
	c := conn{e: tx, d: s.d, m: s.metrics}
	f := Forgotten{}
	if err := c.queryRow(ctx, `SELECT user_id FROM user_ids WHERE local_user = ? AND issuer = ?`,
		s.user, issuer).Scan(&f.UserID); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Forgotten{}, fmt.Errorf("store: forget %s: %w", issuer, err)
	}
	if err := s.forgetRows(ctx, c, issuer, &f); err != nil {
		return Forgotten{}, fmt.Errorf("store: forget %s: %w", issuer, err)
	}
	if f.Generation, err = s.count(ctx, c, issuer, Generation{Forgets: 1}); err != nil {
		return Forgotten{}, err
	}
	if err := tx.Commit(); err != nil {
		return Forgotten{}, fmt.Errorf("store: forget %s: %w", issuer, err)
	}
	return f, nil
}

// forgetRows runs Forget's deletions through c, counting them in f.
func (s *Store) forgetRows(ctx context.Context, c conn, issuer string, f *Forgotten) error {
	dpop, pending, lease := "dpop/"+issuer+"/", "conversation/pending/"+issuer+"/", "account-token "+issuer+" "
	steps := []struct {
		n    *int
		q    string
		args []any
	}{
		{&f.Sessions, `DELETE FROM sessions WHERE local_user = ? AND issuer = ?`, []any{s.user, issuer}},
		{&f.AccountTokens, `DELETE FROM account_tokens WHERE local_user = ? AND issuer = ?`, []any{s.user, issuer}},
		{&f.SeenEvents, `DELETE FROM seen_events WHERE local_user = ? AND issuer = ?`, []any{s.user, issuer}},
		{&f.Conversations, `DELETE FROM conversations WHERE local_user = ? AND issuer = ?`, []any{s.user, issuer}},
		// The device sign-in kept for the Company (auth/deviceflow.go), so
		// no replica polls it on for the forgotten User.
		{&f.Secrets, `DELETE FROM secrets WHERE local_user = ? AND
			(substr(name, 1, length(?)) = ? OR substr(name, 1, length(?)) = ? OR name = ?)`,
			[]any{s.user, dpop, dpop, pending, pending, "signin/device/" + issuer}},
		// A lease still held is someone's work under way; one left over expires unseen.
		{nil, s.d.now(`DELETE FROM leases WHERE local_user = ? AND substr(name, 1, length(?)) = ? AND expires_at <= NOW_NS`),
			[]any{s.user, lease, lease}},
		{nil, `DELETE FROM user_ids WHERE local_user = ? AND issuer = ?`, []any{s.user, issuer}},
	}
	for _, st := range steps {
		res, err := c.exec(ctx, st.q, st.args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && st.n != nil {
			*st.n = int(n)
		}
	}
	return nil
}

// FindUserID returns the local user's User ID at issuer without creating
// one, or an error matching ErrNotFound.
func (s *Store) FindUserID(ctx context.Context, issuer string) (string, error) {
	id, err := s.userID(ctx, issuer)
	if errors.Is(err, ErrNotFound) {
		return "", notFound("user ID for " + issuer)
	}
	return id, err
}

// Issuers returns, in order, the issuers of the Companies at which the
// local user holds anything: a User ID, a Session, an Account Token or a
// conversation.
func (s *Store) Issuers(ctx context.Context) ([]string, error) {
	rows, err := s.conn().query(ctx, `SELECT issuer FROM user_ids WHERE local_user = ?
		UNION SELECT issuer FROM sessions WHERE local_user = ?
		UNION SELECT issuer FROM account_tokens WHERE local_user = ?
		UNION SELECT issuer FROM conversations WHERE local_user = ?
		ORDER BY 1`, s.user, s.user, s.user, s.user)
	if err != nil {
		return nil, fmt.Errorf("store: issuers: %w", err)
	}
	return collect(rows, scanString, "issuers")
}

// LocalUsers returns, in order, the local user keys that hold a User ID,
// an Account Token or a conversation; "" (the default user), when present,
// comes first. A state with one that is not "" is a hosted deployment's.
func (s *Store) LocalUsers(ctx context.Context) ([]string, error) {
	rows, err := s.conn().query(ctx, `SELECT local_user FROM user_ids
		UNION SELECT local_user FROM account_tokens
		UNION SELECT local_user FROM conversations
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("store: local users: %w", err)
	}
	return collect(rows, scanString, "local users")
}

// BlobNames returns the names of the blobs, in order.
func (s *Store) BlobNames(ctx context.Context) ([]string, error) {
	rows, err := s.conn().query(ctx, `SELECT name FROM blobs ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: blob names: %w", err)
	}
	return collect(rows, scanString, "blob names")
}

func scanString(row interface{ Scan(...any) error }) (string, error) {
	var v string
	return v, row.Scan(&v)
}

// AccountTokenUsed records now as when the Account Token of a User at
// issuer for account was last used. Recording a use of a missing one
// changes nothing.
func (s *Store) AccountTokenUsed(ctx context.Context, issuer, userID, account string) error {
	if err := s.write(ctx, `UPDATE account_tokens SET used_at = ?
		WHERE local_user = ? AND issuer = ? AND user_id = ? AND account = ? AND FENCE`,
		unixNano(s.now()), s.user, issuer, userID, account); err != nil {
		return fmt.Errorf("store: record a use of the account token for %s: %w", account, err)
	}
	return nil
}

// migrationGenerations adds the generations, and when each Account Token
// was last used (0 until recorded).
// text is the type of a compared text column.
func migrationGenerations(text string) []string {
	return []string{
		`CREATE TABLE generations (
			local_user ` + text + ` NOT NULL,
			issuer ` + text + ` NOT NULL,
			sign_outs BIGINT NOT NULL,
			unrevoked BIGINT NOT NULL,
			forgets BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			PRIMARY KEY (local_user, issuer))`,
		`ALTER TABLE account_tokens ADD COLUMN used_at BIGINT NOT NULL DEFAULT 0`,
	}
}
