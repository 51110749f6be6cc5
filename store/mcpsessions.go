package store

// This file keeps the MCP sessions of the 2025 revisions of MCP (streamable
// HTTP's Mcp-Session-Id) that the mcpsession package serves, so that any
// replica sharing the state serves a session another opened: what the
// client said when it initialized the session, and the log level it set.
// A session ID is kept only as its SHA-256: the row lets a replica accept
// an ID a client presents, never find one to present.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// MCPSession is what the store keeps of one MCP session.
type MCPSession struct {
	// Initialize is the params of the client's initialize request, JSON.
	Initialize []byte
	// LogLevel is the level of the client's last logging/setLevel; "" when
	// it set none.
	LogLevel string
	// UsedAt is when a request in the session was last recorded
	// (TouchMCPSession), CreatedAt when it was opened.
	UsedAt, CreatedAt time.Time
}

// mcpSessionKey is the primary key of the session whose ID is id.
func mcpSessionKey(id string) string {
	sum := sha256.Sum256([]byte("poppy-mcp mcp session\x00" + id))
	return hex.EncodeToString(sum[:])
}

// PutMCPSession records the MCP session id, opened by s's local user with
// the initialize params init (JSON), and forgets every session of any user
// unused since before expired.
func (s *Store) PutMCPSession(ctx context.Context, id string, init []byte, expired time.Time) error {
	if id == "" || len(init) == 0 {
		return errors.New("store: put MCP session: the ID and the initialize params are required")
	}
	now := unixNano(s.now())
	if _, err := s.conn().exec(ctx, `INSERT INTO mcp_sessions (id, local_user, initialize, log_level, created_at, used_at)
		VALUES (?, ?, ?, '', ?, ?)`, mcpSessionKey(id), s.user, string(init), now, now); err != nil {
		return fmt.Errorf("store: put MCP session: %w", err)
	}
	if _, err := s.conn().exec(ctx, `DELETE FROM mcp_sessions WHERE used_at < ?`, unixNano(expired)); err != nil {
		return fmt.Errorf("store: forget expired MCP sessions: %w", err)
	}
	return nil
}

// MCPSessionOf returns the MCP session id of s's local user, or an error
// matching ErrNotFound when there is none: never opened, ended, expired,
// or another user's (which is not told apart).
func (s *Store) MCPSessionOf(ctx context.Context, id string) (MCPSession, error) {
	var m MCPSession
	var init string
	var created, used int64
	err := s.conn().queryRow(ctx, `SELECT initialize, log_level, created_at, used_at FROM mcp_sessions
		WHERE id = ? AND local_user = ?`, mcpSessionKey(id), s.user).Scan(&init, &m.LogLevel, &created, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return MCPSession{}, notFound("MCP session")
	}
	if err != nil {
		return MCPSession{}, fmt.Errorf("store: MCP session: %w", err)
	}
	m.Initialize, m.CreatedAt, m.UsedAt = []byte(init), fromUnixNano(created), fromUnixNano(used)
	return m, nil
}

// SetMCPSessionLogLevel records level as the log level of s's local
// user's MCP session id.
func (s *Store) SetMCPSessionLogLevel(ctx context.Context, id, level string) error {
	return s.updateMCPSession(ctx, id, "set the log level of", `log_level = ?`, level)
}

// TouchMCPSession records that the MCP session id of s's local user is in
// use now.
func (s *Store) TouchMCPSession(ctx context.Context, id string) error {
	return s.updateMCPSession(ctx, id, "touch", `used_at = ?`, unixNano(s.now()))
}

// updateMCPSession sets one column of a session of s's local user; what
// names the change in the error.
func (s *Store) updateMCPSession(ctx context.Context, id, what, set string, value any) error {
	res, err := s.conn().exec(ctx, `UPDATE mcp_sessions SET `+set+` WHERE id = ? AND local_user = ?`,
		value, mcpSessionKey(id), s.user)
	if err != nil {
		return fmt.Errorf("store: %s the MCP session: %w", what, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return notFound("MCP session")
	}
	return nil
}

// EndMCPSession forgets the MCP session id of s's local user: every
// replica refuses it from now on. Ending a session that is not kept (or is
// another user's) is no error and changes nothing.
func (s *Store) EndMCPSession(ctx context.Context, id string) error {
	if _, err := s.conn().exec(ctx, `DELETE FROM mcp_sessions WHERE id = ? AND local_user = ?`,
		mcpSessionKey(id), s.user); err != nil {
		return fmt.Errorf("store: end the MCP session: %w", err)
	}
	return nil
}

// migrationMCPSessions adds the MCP sessions; text is the type of a
// compared text column.
func migrationMCPSessions(text string) []string {
	return []string{
		`CREATE TABLE mcp_sessions (
			id ` + text + ` PRIMARY KEY,
			local_user ` + text + ` NOT NULL,
			initialize TEXT NOT NULL,
			log_level TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			used_at BIGINT NOT NULL)`,
		`CREATE INDEX mcp_sessions_by_use ON mcp_sessions (used_at)`,
	}
}
