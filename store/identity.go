package store

// This file keeps the agent's client metadata (Poppy 0.1 §4.1): what
// `poppy-mcp init` was told about the identity it made, so that `serve`
// publishes and uses the same agent.json without being told again. There is
// one identity per state directory, as there is one signing key.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AgentMetadata is the agent's client metadata as `poppy-mcp init` was told
// it. It holds no secret.
type AgentMetadata struct {
	ClientID     string
	ClientName   string
	LogoURI      string // "" when none
	JWKSURI      string
	RedirectURIs []string          // the Direct Sign-In callbacks; none when empty
	Extensions   map[string]string // extension name -> version; none when empty
	UpdatedAt    time.Time         // set by PutAgentMetadata
}

// PutAgentMetadata stores m, replacing the metadata stored before.
func (s *Store) PutAgentMetadata(ctx context.Context, m AgentMetadata) error {
	if m.ClientID == "" {
		return errors.New("store: agent metadata without a client_id")
	}
	redirects, err := json.Marshal(append([]string{}, m.RedirectURIs...))
	if err != nil {
		return fmt.Errorf("store: agent metadata: %w", err)
	}
	ext := m.Extensions
	if ext == nil {
		ext = map[string]string{}
	}
	extensions, err := json.Marshal(ext)
	if err != nil {
		return fmt.Errorf("store: agent metadata: %w", err)
	}
	_, err = s.conn().exec(ctx, `INSERT INTO agent_metadata
		(id, client_id, client_name, logo_uri, jwks_uri, redirect_uris, extensions, updated_at)
		VALUES (1, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET client_id = excluded.client_id, client_name = excluded.client_name,
			logo_uri = excluded.logo_uri, jwks_uri = excluded.jwks_uri, redirect_uris = excluded.redirect_uris,
			extensions = excluded.extensions, updated_at = excluded.updated_at`,
		m.ClientID, m.ClientName, m.LogoURI, m.JWKSURI, string(redirects), string(extensions), unixNano(s.now()))
	if err != nil {
		return fmt.Errorf("store: put agent metadata: %w", err)
	}
	return nil
}

// AgentMetadata returns the stored metadata, or an error matching
// ErrNotFound when `poppy-mcp init` has not stored any.
func (s *Store) AgentMetadata(ctx context.Context) (AgentMetadata, error) {
	var m AgentMetadata
	var redirects, extensions string
	var updated int64
	err := s.conn().queryRow(ctx, `SELECT client_id, client_name, logo_uri, jwks_uri, redirect_uris, extensions, updated_at
		FROM agent_metadata WHERE id = 1`).Scan(&m.ClientID, &m.ClientName, &m.LogoURI, &m.JWKSURI, &redirects, &extensions, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return m, notFound("agent metadata")
	}
	if err != nil {
		return m, fmt.Errorf("store: agent metadata: %w", err)
	}
	if err := json.Unmarshal([]byte(redirects), &m.RedirectURIs); err != nil {
		return m, fmt.Errorf("store: agent metadata: redirect_uris: %w", err)
	}
	if err := json.Unmarshal([]byte(extensions), &m.Extensions); err != nil {
		return m, fmt.Errorf("store: agent metadata: extensions: %w", err)
	}
	m.UpdatedAt = fromUnixNano(updated)
	return m, nil
}
