package store

// This file keeps the one-time local pages (package pages) and the Direct
// Sign-In callbacks, so that whichever replica a load balancer picks serves
// a page another replica opened. A page is found by the hash of its token:
// the token, a capability, is never kept. Its state is sealed under the
// state key with the hash and the person it was opened for as additional
// data, and a page is used up by one DELETE ... RETURNING, so two replicas
// (or two requests) never both use it.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Page is a one-time page as the store keeps it.
type Page struct {
	// Hash is PageHash of the page's token; required.
	Hash string
	// Owner is the local user the page was opened for ("" the default
	// user): PutPage sets it from the view it is called on.
	Owner string
	// Kind names the handler that serves the page (package pages).
	Kind string
	// State is what the handler needs, sealed at rest.
	State []byte
	// ExpiresAt is when the page stops opening; required.
	ExpiresAt time.Time
}

// PageHash is what a page is kept under: the SHA-256 of its token, hex.
func PageHash(token string) string {
	h := sha256.Sum256([]byte("poppy-mcp page\x00" + token))
	return hex.EncodeToString(h[:])
}

// migrationPages adds the pages table; text is the dialect's text type,
// blob its bytes type.
func migrationPages(text, blob string) []string {
	return []string{
		`CREATE TABLE pages (
			token_hash ` + text + ` PRIMARY KEY,
			local_user ` + text + ` NOT NULL,
			kind ` + text + ` NOT NULL,
			state ` + blob + ` NOT NULL,
			expires_at BIGINT NOT NULL)`,
		`CREATE INDEX pages_expires ON pages (expires_at)`,
	}
}

// pageAAD binds a page's sealed state to its hash and owner.
func pageAAD(hash, owner string) []byte { return recordAAD("page", hash, owner) }

// PutPage keeps p for the view's local user, replacing a page of the same
// hash; it also drops the pages that have expired.
func (s *Store) PutPage(ctx context.Context, p Page) error {
	if p.Hash == "" || p.Kind == "" || p.ExpiresAt.IsZero() {
		return errors.New("store: put page: Hash, Kind and ExpiresAt are required")
	}
	c := s.conn()
	if _, err := c.exec(ctx, `DELETE FROM pages WHERE expires_at <= ?`, unixNano(s.now())); err != nil {
		return fmt.Errorf("store: drop expired pages: %w", err)
	}
	_, err := c.exec(ctx, `INSERT INTO pages (token_hash, local_user, kind, state, expires_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (token_hash) DO UPDATE SET local_user = excluded.local_user, kind = excluded.kind,
		state = excluded.state, expires_at = excluded.expires_at`,
		p.Hash, s.user, p.Kind, s.seal(p.State, pageAAD(p.Hash, s.user)), unixNano(p.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: put page: %w", err)
	}
	return nil
}

const pageColumns = `token_hash, local_user, kind, state, expires_at`

// Page returns the open page of hash, whoever it was opened for (its
// Owner says whom), or an error matching ErrNotFound when there is none or
// it has expired.
func (s *Store) Page(ctx context.Context, hash string) (Page, error) {
	return s.scanPage(s.conn().queryRow(ctx, `SELECT `+pageColumns+` FROM pages WHERE token_hash = ? AND expires_at > ?`,
		hash, unixNano(s.now())))
}

// TakePage uses up the open page of hash and returns it, in one statement:
// of requests racing for it, on one replica or several, one gets it and
// the others an error matching ErrNotFound, as after it expired.
func (s *Store) TakePage(ctx context.Context, hash string) (Page, error) {
	return s.scanPage(s.conn().queryRow(ctx, `DELETE FROM pages WHERE token_hash = ? AND expires_at > ? RETURNING `+pageColumns,
		hash, unixNano(s.now())))
}

// DeletePage closes the page of hash. Deleting a missing one is not an
// error.
func (s *Store) DeletePage(ctx context.Context, hash string) error {
	if _, err := s.conn().exec(ctx, `DELETE FROM pages WHERE token_hash = ?`, hash); err != nil {
		return fmt.Errorf("store: delete page: %w", err)
	}
	return nil
}

// scanPage reads one page row and opens its state.
func (s *Store) scanPage(row row) (Page, error) {
	var p Page
	var sealed []byte
	var expires int64
	err := row.Scan(&p.Hash, &p.Owner, &p.Kind, &sealed, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Page{}, notFound("page")
	}
	if err != nil {
		return Page{}, fmt.Errorf("store: page: %w", err)
	}
	p.ExpiresAt = fromUnixNano(expires)
	if p.State, err = s.open(sealed, pageAAD(p.Hash, p.Owner), "a page's state"); err != nil {
		return Page{}, err
	}
	return p, nil
}
