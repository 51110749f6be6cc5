package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Conversation is what the Personal Agent remembers of a conversation
// with a Company (Poppy 0.1 section 7): where to resume reading and how it
// stands. Conversation IDs are chosen by each Company, so two Companies may
// use the same one: a conversation is identified by its Issuer and ID.
type Conversation struct {
	ID        string // the Company's conversation ID; required
	Domain    string // the domain it was started at
	Issuer    string // the Company's auth.issuer; required
	UserID    string
	Account   string // the account it belongs to once it used one
	ParentID  string // for a Direct Conversation, its parent's ID
	Cursor    string // where to resume reading events
	Status    string
	Responder string
	Closed    bool
	// UpdatedAt is set by PutConversation from Options.Now; its input is
	// ignored.
	UpdatedAt time.Time
}

// PutConversation stores c, replacing the conversation with the same Issuer
// and ID.
func (s *Store) PutConversation(ctx context.Context, c Conversation) error {
	if c.Issuer == "" || c.ID == "" {
		return errors.New("store: put conversation: Issuer and ID are required")
	}
	_, err := s.conn().exec(ctx, `INSERT INTO conversations
		(local_user, issuer, id, domain, user_id, account, parent_id, cursor, status, responder, closed, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (local_user, issuer, id) DO UPDATE SET domain = excluded.domain, user_id = excluded.user_id,
		account = excluded.account, parent_id = excluded.parent_id, cursor = excluded.cursor,
		status = excluded.status, responder = excluded.responder, closed = excluded.closed,
		updated_at = excluded.updated_at`,
		s.user, c.Issuer, c.ID, c.Domain, c.UserID, c.Account, c.ParentID, c.Cursor, c.Status, c.Responder,
		c.Closed, unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put conversation %s: %w", c.ID, err)
	}
	return nil
}

const conversationColumns = `issuer, id, domain, user_id, account, parent_id, cursor, status,
	responder, closed, updated_at`

func scanConversation(row interface{ Scan(...any) error }) (Conversation, error) {
	var c Conversation
	var updated int64
	err := row.Scan(&c.Issuer, &c.ID, &c.Domain, &c.UserID, &c.Account, &c.ParentID, &c.Cursor,
		&c.Status, &c.Responder, &c.Closed, &updated)
	c.UpdatedAt = fromUnixNano(updated)
	return c, err
}

// Conversation returns the conversation with the given issuer and ID, or
// an error matching ErrNotFound.
func (s *Store) Conversation(ctx context.Context, issuer, id string) (Conversation, error) {
	c, err := scanConversation(s.conn().queryRow(ctx,
		`SELECT `+conversationColumns+` FROM conversations WHERE local_user = ? AND issuer = ? AND id = ?`,
		s.user, issuer, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Conversation{}, notFound("conversation " + id)
	}
	if err != nil {
		return Conversation{}, fmt.Errorf("store: conversation %s: %w", id, err)
	}
	return c, nil
}

// Conversations returns the local user's conversations started at domain
// ("" for every domain): open ones first, then most recently stored first.
func (s *Store) Conversations(ctx context.Context, domain string) ([]Conversation, error) {
	q := `SELECT ` + conversationColumns + ` FROM conversations WHERE local_user = ?`
	args := []any{s.user}
	if domain != "" {
		q += ` AND domain = ?`
		args = append(args, domain)
	}
	rows, err := s.conn().query(ctx, q+` ORDER BY closed, updated_at DESC, issuer, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: conversations: %w", err)
	}
	return collect(rows, scanConversation, "conversations")
}

// DeleteConversation removes a conversation and the events marked seen in
// it. Deleting a missing one is not an error.
func (s *Store) DeleteConversation(ctx context.Context, issuer, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	defer tx.Rollback()
	c := conn{e: tx, d: s.d, m: s.metrics}
	if _, err := c.exec(ctx, `DELETE FROM seen_events WHERE local_user = ? AND issuer = ? AND conversation_id = ?`,
		s.user, issuer, id); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	if _, err := c.exec(ctx, `DELETE FROM conversations WHERE local_user = ? AND issuer = ? AND id = ?`,
		s.user, issuer, id); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	return nil
}

// MarkSeen records that the events with the given IDs were seen in a
// conversation, so that events delivered again (a resumed stream, a
// retried long-poll) are not handled twice. Marking an event again is not
// an error.
func (s *Store) MarkSeen(ctx context.Context, issuer, conversationID string, eventIDs ...string) error {
	if len(eventIDs) == 0 {
		return nil
	}
	if len(eventIDs) <= markSeenBatch {
		return s.markSeen(ctx, s.conn(), issuer, conversationID, eventIDs)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: mark seen: %w", err)
	}
	defer tx.Rollback()
	for batch := range slices.Chunk(eventIDs, markSeenBatch) {
		if err := s.markSeen(ctx, conn{e: tx, d: s.d, m: s.metrics}, issuer, conversationID, batch); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: mark seen: %w", err)
	}
	return nil
}

// markSeenBatch is how many events one statement of MarkSeen marks (five
// parameters each, far below either database's limit).
const markSeenBatch = 100

// markSeen marks eventIDs seen in one statement.
func (s *Store) markSeen(ctx context.Context, c conn, issuer, conversationID string, eventIDs []string) error {
	now := unixNano(s.now())
	q := `INSERT INTO seen_events (local_user, issuer, conversation_id, event_id, seen_at) VALUES ` +
		strings.Repeat(`(?, ?, ?, ?, ?), `, len(eventIDs)-1) + `(?, ?, ?, ?, ?)
		ON CONFLICT (local_user, issuer, conversation_id, event_id) DO NOTHING`
	args := make([]any, 0, 5*len(eventIDs))
	for _, ev := range eventIDs {
		args = append(args, s.user, issuer, conversationID, ev, now)
	}
	if _, err := c.exec(ctx, q, args...); err != nil {
		return fmt.Errorf("store: mark seen: %w", err)
	}
	return nil
}

// Seen reports whether MarkSeen recorded the event in the conversation.
func (s *Store) Seen(ctx context.Context, issuer, conversationID, eventID string) (bool, error) {
	var n int
	err := s.conn().queryRow(ctx, `SELECT COUNT(*) FROM seen_events
		WHERE local_user = ? AND issuer = ? AND conversation_id = ? AND event_id = ?`,
		s.user, issuer, conversationID, eventID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: seen: %w", err)
	}
	return n > 0, nil
}

// PutBlob stores cached derived data under name (a translated OpenAPI
// catalog keyed by its URL, say) with a version (its ETag), replacing any.
// Blobs are shared by every local user and not encrypted: never put a
// secret or anything of one person's in one.
func (s *Store) PutBlob(ctx context.Context, name, version string, data []byte) error {
	if name == "" {
		return errors.New("store: empty blob name")
	}
	if data == nil {
		data = []byte{} // the column is NOT NULL
	}
	_, err := s.conn().exec(ctx, `INSERT INTO blobs (name, version, data, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET version = excluded.version, data = excluded.data,
		updated_at = excluded.updated_at`, name, version, data, unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put blob %q: %w", name, err)
	}
	return nil
}

// Blob returns the version and data stored under name, or an error
// matching ErrNotFound.
func (s *Store) Blob(ctx context.Context, name string) (version string, data []byte, err error) {
	err = s.conn().queryRow(ctx, `SELECT version, data FROM blobs WHERE name = ?`, name).Scan(&version, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, notFound(fmt.Sprintf("blob %q", name))
	}
	if err != nil {
		return "", nil, fmt.Errorf("store: blob %q: %w", name, err)
	}
	return version, data, nil
}

// DeleteBlob removes a blob. Deleting a missing one is not an error.
func (s *Store) DeleteBlob(ctx context.Context, name string) error {
	if _, err := s.conn().exec(ctx, `DELETE FROM blobs WHERE name = ?`, name); err != nil {
		return fmt.Errorf("store: delete blob %q: %w", name, err)
	}
	return nil
}
