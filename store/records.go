package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// UserID returns the User ID of s's local user for the Company identified
// by issuer, creating it on first use. Every process or replica sharing the
// state gets the same ID, even when several create it at once; two local
// users get two different IDs.
func (s *Store) UserID(ctx context.Context, issuer string) (string, error) {
	if issuer == "" {
		return "", errors.New("store: user ID: empty issuer")
	}
	id, err := s.userID(ctx, issuer)
	if !errors.Is(err, ErrNotFound) {
		return id, err
	}
	// Poppy 0.1 §4.2: "It MUST NOT contain or be derived from personal
	// information [...] even with a keyed hash": 128 random bits, opaque,
	// and different for each Company.
	b := make([]byte, 16)
	rand.Read(b)
	// Of processes racing here, the first insert wins and every one reads it.
	if _, err := s.conn().exec(ctx, `INSERT INTO user_ids (local_user, issuer, user_id, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (local_user, issuer) DO NOTHING`,
		s.user, issuer, "usr_"+base64.RawURLEncoding.EncodeToString(b), unixNano(s.now())); err != nil {
		return "", fmt.Errorf("store: user ID for %s: %w", issuer, err)
	}
	return s.userID(ctx, issuer)
}

func (s *Store) userID(ctx context.Context, issuer string) (string, error) {
	var id string
	err := s.conn().queryRow(ctx, `SELECT user_id FROM user_ids WHERE local_user = ? AND issuer = ?`,
		s.user, issuer).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: user ID for %s: %w", issuer, err)
	}
	return id, nil
}

// Session is what the Personal Agent remembers of a Session (Poppy 0.1
// §4.2). It holds no token: Session Tokens live as secrets.
type Session struct {
	Issuer   string // the Company's auth.issuer; required
	UserID   string
	ID       string // the session_id the Company returned; required
	Domain   string // the domain the Session was started for
	Account  string // the account it is signed in to, if any
	SignedIn bool
	Scopes   []string // granted account scopes; nil when none
	// ExpiresAt is when the Session Token expires. Zero: unknown.
	ExpiresAt time.Time
	// UpdatedAt is set by PutSession from Options.Now; its input is ignored.
	UpdatedAt time.Time
}

// PutSession stores sess, replacing the local user's Session with the same
// Issuer and ID.
func (s *Store) PutSession(ctx context.Context, sess Session) error {
	if sess.Issuer == "" || sess.ID == "" {
		return errors.New("store: put session: Issuer and ID are required")
	}
	scopes, err := joinScopes(sess.Scopes)
	if err != nil {
		return err
	}
	err = s.write(ctx, `INSERT INTO sessions
		(local_user, issuer, id, user_id, domain, account, signed_in, scopes, expires_at, updated_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE FENCE
		ON CONFLICT (local_user, issuer, id) DO UPDATE SET user_id = excluded.user_id, domain = excluded.domain,
		account = excluded.account, signed_in = excluded.signed_in, scopes = excluded.scopes,
		expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
		s.user, sess.Issuer, sess.ID, sess.UserID, sess.Domain, sess.Account, sess.SignedIn, scopes,
		unixNano(sess.ExpiresAt), unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put session %s: %w", sess.ID, err)
	}
	return nil
}

const sessionColumns = `issuer, id, user_id, domain, account, signed_in, scopes, expires_at, updated_at`

func scanSession(row interface{ Scan(...any) error }) (Session, error) {
	var sess Session
	var scopes string
	var expires, updated int64
	err := row.Scan(&sess.Issuer, &sess.ID, &sess.UserID, &sess.Domain, &sess.Account,
		&sess.SignedIn, &scopes, &expires, &updated)
	sess.Scopes = splitScopes(scopes)
	sess.ExpiresAt, sess.UpdatedAt = fromUnixNano(expires), fromUnixNano(updated)
	return sess, err
}

// Session returns the Session with the given issuer and ID, or an error
// matching ErrNotFound.
func (s *Store) Session(ctx context.Context, issuer, id string) (Session, error) {
	sess, err := scanSession(s.conn().queryRow(ctx,
		`SELECT `+sessionColumns+` FROM sessions WHERE local_user = ? AND issuer = ? AND id = ?`, s.user, issuer, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, notFound("session " + id)
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: session %s: %w", id, err)
	}
	return sess, nil
}

// Sessions returns the Sessions at issuer, most recently stored first.
func (s *Store) Sessions(ctx context.Context, issuer string) ([]Session, error) {
	rows, err := s.conn().query(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE local_user = ? AND issuer = ? ORDER BY updated_at DESC, id`, s.user, issuer)
	if err != nil {
		return nil, fmt.Errorf("store: sessions: %w", err)
	}
	return collect(rows, scanSession, "sessions")
}

// DeleteSession removes a Session. Deleting a missing one is not an error.
func (s *Store) DeleteSession(ctx context.Context, issuer, id string) error {
	if _, err := s.conn().exec(ctx,
		`DELETE FROM sessions WHERE local_user = ? AND issuer = ? AND id = ?`, s.user, issuer, id); err != nil {
		return fmt.Errorf("store: delete session %s: %w", id, err)
	}
	return nil
}

// AccountToken is an Account Token (Poppy 0.1 §4.8) with what the Personal
// Agent needs to choose it. Token is encrypted at rest.
type AccountToken struct {
	Issuer  string   // the Company's auth.issuer; required
	UserID  string   // required
	Account string   // the account it signs in to; required
	Scopes  []string // granted scopes; nil when none
	// ExpiresAt is when the Account Token expires. Zero: no expiry.
	ExpiresAt time.Time
	// Token is the OAuth refresh token; required.
	Token Secret
	// UsedAt is when the Account Token was last used: stored (issued or
	// rotated) or sent in a grant ([Store.AccountTokenUsed]). PutAccountToken
	// sets it from Options.Now; its input is ignored.
	UsedAt time.Time
}

// accountTokenAAD binds a sealed Account Token to its (issuer, user,
// account) of s's local user.
func (s *Store) accountTokenAAD(issuer, userID, account string) []byte {
	return s.userAAD("account-token", issuer, userID, account)
}

// PutAccountToken stores t, replacing the Account Token for the same
// issuer, User and account.
func (s *Store) PutAccountToken(ctx context.Context, t AccountToken) error {
	if t.Issuer == "" || t.UserID == "" || t.Account == "" || t.Token.IsZero() {
		return errors.New("store: put account token: Issuer, UserID, Account and Token are required")
	}
	scopes, err := joinScopes(t.Scopes)
	if err != nil {
		return err
	}
	// Poppy 0.1 §4.8: "Personal Agents MUST store Account Tokens as secrets".
	sealed := s.seal(t.Token.b, s.accountTokenAAD(t.Issuer, t.UserID, t.Account))
	err = s.write(ctx, `INSERT INTO account_tokens
		(local_user, issuer, user_id, account, scopes, expires_at, token, updated_at, used_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE FENCE
		ON CONFLICT (local_user, issuer, user_id, account) DO UPDATE SET scopes = excluded.scopes,
		expires_at = excluded.expires_at, token = excluded.token, updated_at = excluded.updated_at,
		used_at = excluded.used_at`,
		s.user, t.Issuer, t.UserID, t.Account, scopes, unixNano(t.ExpiresAt), sealed, unixNano(s.now()), unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put account token for %s: %w", t.Account, err)
	}
	return nil
}

// AccountTokens returns the Account Tokens of a User at issuer, by account,
// expired ones included (the caller compares ExpiresAt with its clock).
func (s *Store) AccountTokens(ctx context.Context, issuer, userID string) ([]AccountToken, error) {
	rows, err := s.conn().query(ctx, `SELECT `+accountTokenColumns+`
		FROM account_tokens WHERE local_user = ? AND issuer = ? AND user_id = ? ORDER BY account`,
		s.user, issuer, userID)
	if err != nil {
		return nil, fmt.Errorf("store: account tokens: %w", err)
	}
	return collect(rows, s.scanAccountToken, "account tokens")
}

// AccountToken returns the Account Token of a User at issuer for account,
// or an error matching ErrNotFound.
func (s *Store) AccountToken(ctx context.Context, issuer, userID, account string) (AccountToken, error) {
	t, err := s.scanAccountToken(s.conn().queryRow(ctx, `SELECT `+accountTokenColumns+` FROM account_tokens
		WHERE local_user = ? AND issuer = ? AND user_id = ? AND account = ?`,
		s.user, issuer, userID, account))
	if errors.Is(err, sql.ErrNoRows) {
		return AccountToken{}, notFound("account token for " + account)
	}
	if err != nil && !isDecryptError(err) {
		return AccountToken{}, fmt.Errorf("store: account token for %s: %w", account, err)
	}
	return t, err
}

const accountTokenColumns = `issuer, user_id, account, scopes, expires_at, token, used_at`

func (s *Store) scanAccountToken(row interface{ Scan(...any) error }) (AccountToken, error) {
	var t AccountToken
	var scopes string
	var expires, used int64
	var sealed []byte
	if err := row.Scan(&t.Issuer, &t.UserID, &t.Account, &scopes, &expires, &sealed, &used); err != nil {
		return AccountToken{}, err
	}
	t.Scopes, t.ExpiresAt, t.UsedAt = splitScopes(scopes), fromUnixNano(expires), fromUnixNano(used)
	plain, err := s.open(sealed, s.accountTokenAAD(t.Issuer, t.UserID, t.Account),
		fmt.Sprintf("the account token for %s at %s", t.Account, t.Issuer))
	if err != nil {
		return AccountToken{}, err
	}
	t.Token = Secret{b: plain}
	return t, nil
}

// DeleteAccountToken removes an Account Token. Deleting a missing one is
// not an error.
func (s *Store) DeleteAccountToken(ctx context.Context, issuer, userID, account string) error {
	if err := s.write(ctx, `DELETE FROM account_tokens
		WHERE local_user = ? AND issuer = ? AND user_id = ? AND account = ? AND FENCE`, s.user, issuer, userID, account); err != nil {
		return fmt.Errorf("store: delete account token for %s: %w", account, err)
	}
	return nil
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(interface{ Scan(...any) error }) (T, error), what string) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if isDecryptError(err) {
			return nil, err // already says what and why
		}
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// Times are stored as Unix nanoseconds, 0 for the zero time. Times outside
// what an int64 of nanoseconds holds (before 1678, after 2262) are clamped,
// so a Company's huge lifetime reads back as year 2262, not garbage.
func unixNano(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(time.Unix(0, math.MinInt64+1)):
		return math.MinInt64 + 1
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// joinScopes encodes scopes as OAuth does, space-separated (RFC 6749 §3.3),
// rejecting a scope that is empty or holds a space.
func joinScopes(scopes []string) (string, error) {
	for _, sc := range scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n") {
			return "", fmt.Errorf("store: invalid scope %q (RFC 6749 §3.3: no spaces)", sc)
		}
	}
	return strings.Join(scopes, " "), nil
}

func splitScopes(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}
