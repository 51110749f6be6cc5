package person

// This file is signing the person out of a Company, as the sign_out tool
// does (Poppy 0.1 §4.9): auth revokes the Account Token held at the
// Company (RFC 7009) under the token's lease, deletes it, and counts the
// sign-out in the state, so that a serve already running continues signed
// out from its next request; the Sessions there are recorded signed out,
// so that status says so at once.

import (
	"context"
	"errors"
	"fmt"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// SignOutReport is what a sign-out did: `sign-out --json`'s output.
type SignOutReport struct {
	Domain  string   `json:"domain"`
	Issuer  string   `json:"issuer"`
	Domains []string `json:"domains"`
	// Held: an Account Token was held for the Company.
	Held bool `json:"held"`
	// Revoked: the Company revoked it.
	Revoked bool `json:"revoked"`
	// Deleted: poppy-mcp no longer holds it.
	Deleted bool     `json:"deleted"`
	Scopes  []string `json:"scopes"`
	Error   string   `json:"error,omitempty"`
}

// SignOut signs the person out of c: the Account Token is revoked and
// deleted; when the Company cannot revoke it, it is deleted anyway only
// with force. The error of a report is a revocation that failed; a person
// who never used the Company holds nothing, and that is no error.
func (s *State) SignOut(ctx context.Context, c *Company, force bool) (*SignOutReport, error) {
	rep := &SignOutReport{Domain: c.Domain, Issuer: c.Issuer, Domains: c.Covered(), Scopes: []string{}}
	userID, err := s.Store.FindUserID(ctx, c.Issuer)
	if c.Issuer == "" || errors.Is(err, store.ErrNotFound) {
		return rep, nil // never used there: nothing held
	}
	if err != nil {
		return nil, err
	}
	agent, err := s.agent(ctx)
	if err != nil {
		return nil, err
	}
	res, err := agent.SignOutUser(ctx, c.Auth, userID, force)
	rep.Held, rep.Revoked, rep.Deleted = res.Held, res.Revoked, res.Deleted
	if res.Scopes != nil {
		rep.Scopes = res.Scopes
	}
	if err != nil && c.DocErr != nil {
		err = fmt.Errorf("its documents could not be used: %w", c.DocErr)
	}
	if err == nil || res.Deleted {
		if serr := recordSignedOut(ctx, s.Store, c.Issuer); serr != nil {
			return rep, serr
		}
	}
	return rep, err
}

// recordSignedOut records the Sessions at issuer as signed out, as the
// serve using them will once it notices, so that status says so now.
func recordSignedOut(ctx context.Context, st *store.Store, issuer string) error {
	sessions, err := st.Sessions(ctx, issuer)
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if s.SignedIn {
			s.SignedIn, s.Scopes, s.Account = false, nil, ""
			if err := st.PutSession(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}
