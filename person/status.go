package person

// This file is what status shows: the identity (client_id, key IDs), then
// each Company the person used: its domains, issuer, Sessions, whether
// signed in and with which scopes, when the Account Token was last used,
// and its conversations.

import (
	"context"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/published"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// StatusReport is what the state holds for the person: `status --json`'s
// output.
type StatusReport struct {
	State     string `json:"state"`
	KeySource string `json:"key_source"`
	User      string `json:"user,omitempty"`
	// LogID is the ID serve's logs name the --user person by ("user=...",
	// keyed by the deployment's secret); "" before serve made one, and as
	// Status leaves it.
	LogID     string          `json:"log_id,omitempty"`
	Identity  *IdentityStatus `json:"identity"` // null without one
	Companies []CompanyStatus `json:"companies"`
}

// IdentityStatus is the agent's identity (Poppy 0.1 §4.1).
type IdentityStatus struct {
	ClientID string      `json:"client_id"`
	JWKSURI  string      `json:"jwks_uri"`
	Keys     []KeyStatus `json:"keys"`
	// Published is the documents at client_id and jwks_uri compared with
	// the state (internal/published); nil as Status leaves it, and null
	// with --offline.
	Published *published.Result `json:"published"`
}

// KeyStatus is one public key in jwks.json.
type KeyStatus struct {
	KeyID   string `json:"kid"`
	Signing bool   `json:"signing"`
}

// CompanyStatus is what the state holds at one Company.
type CompanyStatus struct {
	Issuer  string   `json:"issuer"`
	Domains []string `json:"domains"`
	// SignedIn: an Account Token is held, so Sessions start signed in.
	SignedIn     bool              `json:"signed_in"`
	Scopes       []string          `json:"scopes"`
	AccountToken *TokenStatus      `json:"account_token"` // null when none is held
	Sessions     []SessionStatus   `json:"sessions"`
	Open         int               `json:"open_conversations"`
	Convs        []ConversationRow `json:"conversations"`
}

// TokenStatus describes the Account Token held, never the token.
type TokenStatus struct {
	LastUsed  time.Time `json:"last_used"`           // zero: not recorded
	ExpiresAt time.Time `json:"expires_at,omitzero"` // zero: no expiry
	Expired   bool      `json:"expired"`
}

// SessionStatus is a Session as the process using it last recorded it.
type SessionStatus struct {
	ID        string    `json:"session_id"`
	Domain    string    `json:"domain"`
	SignedIn  bool      `json:"signed_in"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"token_expires_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ConversationRow is one conversation held.
type ConversationRow struct {
	ID     string `json:"conversation_id"`
	Domain string `json:"domain"`
	Status string `json:"status"`
	Closed bool   `json:"closed"`
}

// Status is what the state holds for the person: the state, the identity
// id (nil for none), and per Company its domains, sign-in, Sessions and
// conversations. Never a token or a code: the state's secrets stay in it.
func (s *State) Status(ctx context.Context, id *auth.Identity) (*StatusReport, error) {
	rep := &StatusReport{State: s.Root.Where(), KeySource: s.Root.KeySource(), User: s.User, Companies: []CompanyStatus{}}
	if id != nil {
		rep.Identity = identityOf(id)
	}
	issuers, err := s.Store.Issuers(ctx)
	if err != nil {
		return nil, err
	}
	for _, iss := range issuers {
		cs, err := companyOf(ctx, s.Store, iss)
		if err != nil {
			return nil, err
		}
		rep.Companies = append(rep.Companies, cs)
	}
	return rep, nil
}

// identityOf is id as status shows it.
func identityOf(id *auth.Identity) *IdentityStatus {
	md := id.Metadata()
	is := &IdentityStatus{ClientID: md.ClientID, JWKSURI: md.JWKSURI}
	for _, k := range id.JWKS().Keys {
		is.Keys = append(is.Keys, KeyStatus{KeyID: k.KeyID, Signing: k.KeyID == id.CurrentKeyID()})
	}
	return is
}

// companyOf is what the state holds at the Company issuer.
func companyOf(ctx context.Context, st *store.Store, issuer string) (CompanyStatus, error) {
	cs := CompanyStatus{Issuer: issuer, Scopes: []string{}, Sessions: []SessionStatus{}, Convs: []ConversationRow{}}
	sessions, err := st.Sessions(ctx, issuer)
	if err != nil {
		return cs, err
	}
	for _, s := range sessions {
		cs.Sessions = append(cs.Sessions, SessionStatus{ID: s.ID, Domain: s.Domain, SignedIn: s.SignedIn,
			Scopes: nonNil(s.Scopes), ExpiresAt: s.ExpiresAt, UpdatedAt: s.UpdatedAt})
	}
	convs, err := st.Conversations(ctx, "")
	if err != nil {
		return cs, err
	}
	for _, c := range convs {
		if c.Issuer == issuer {
			cs.Convs = append(cs.Convs, ConversationRow{ID: c.ID, Domain: c.Domain, Status: c.Status, Closed: c.Closed})
			if !c.Closed {
				cs.Open++
			}
		}
	}
	if cs.Domains, err = RecordedDomains(ctx, st, issuer); err != nil {
		return cs, err
	}
	cs.Domains = nonNil(cs.Domains)
	userID, err := st.FindUserID(ctx, issuer)
	if err != nil {
		return cs, nil // no User ID: no Account Token either
	}
	tok, err := st.AccountToken(ctx, issuer, userID, auth.DefaultAccountLabel)
	if err != nil {
		return cs, nil // none held (or one that does not decrypt: status says none)
	}
	expired := !tok.ExpiresAt.IsZero() && !time.Now().Before(tok.ExpiresAt)
	cs.AccountToken = &TokenStatus{LastUsed: tok.UsedAt, ExpiresAt: tok.ExpiresAt, Expired: expired}
	cs.SignedIn, cs.Scopes = !expired, nonNil(tok.Scopes)
	return cs, nil
}

// nonNil is s, or an empty slice for nil: JSON says [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
