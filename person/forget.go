package person

// This file is forgetting a Company: the Account Token held there is
// revoked (as signing out does), then everything poppy-mcp holds for the
// person there is deleted, the User ID included, so that the Company sees
// a new User next time (Poppy 0.1 §4.2: one User ID per User per Company,
// and a Company is its issuer, so the User ID and everything else cover
// all of the issuer's domains, §3.2).

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/catalogstore"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// ForgetReport is what a forget did: `forget --json`'s output.
type ForgetReport struct {
	Domain  string   `json:"domain"`
	Issuer  string   `json:"issuer"`
	Domains []string `json:"domains"`
	// Held: poppy-mcp held something for the Company.
	Held bool `json:"held"`
	// Forgotten: it was deleted.
	Forgotten bool `json:"forgotten"`
	// AccountToken: one was held; Revoked: the Company revoked it.
	AccountToken bool `json:"account_token"`
	Revoked      bool `json:"revoked"`
	// Deleted counts what was deleted.
	Deleted ForgetCounts `json:"deleted"`
	Error   string       `json:"error,omitempty"`
}

// ForgetCounts counts the records a forget deleted.
type ForgetCounts struct {
	UserID        bool `json:"user_id"`
	Sessions      int  `json:"sessions"`
	Conversations int  `json:"conversations"`
	SeenEvents    int  `json:"seen_events"`
	Secrets       int  `json:"secrets"` // DPoP keys and pending messages
	Catalogs      int  `json:"catalogs"`
}

// Holding is what the person holds at a Company, before a forget.
type Holding struct {
	UserID, AccountToken    bool
	Sessions, Conversations int
}

// Forget is one forget of what the person holds at a Company, in the
// steps between which the caller may ask the person: Held, Revoke, Delete.
type Forget struct {
	s *State
	c *Company
	// Report is what the steps found and did so far.
	Report *ForgetReport
}

// Forget begins forgetting c.
func (s *State) Forget(c *Company) *Forget {
	return &Forget{s: s, c: c, Report: &ForgetReport{Domain: c.Domain, Issuer: c.Issuer, Domains: c.Covered()}}
}

// Held finds what the person holds at the Company; Report.Held says
// whether there is anything to forget.
func (f *Forget) Held(ctx context.Context) (Holding, error) {
	st, iss := f.s.Store, f.c.Issuer
	if iss == "" {
		return Holding{}, nil
	}
	userID, err := st.FindUserID(ctx, iss)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Holding{}, err
	}
	sessions, err := st.Sessions(ctx, iss)
	if err != nil {
		return Holding{}, err
	}
	convs, err := st.Conversations(ctx, "")
	if err != nil {
		return Holding{}, err
	}
	convs = slices.DeleteFunc(convs, func(c store.Conversation) bool { return c.Issuer != iss })
	h := Holding{UserID: userID != "", Sessions: len(sessions), Conversations: len(convs)}
	if userID != "" {
		if _, err := st.AccountToken(ctx, iss, userID, auth.DefaultAccountLabel); err == nil {
			h.AccountToken = true
		}
	}
	f.Report.AccountToken = h.AccountToken
	f.Report.Held = h.UserID || h.Sessions > 0 || h.Conversations > 0
	return h, nil
}

// Revoke revokes the Account Token at the Company, when one is held.
func (f *Forget) Revoke(ctx context.Context) error {
	if !f.Report.AccountToken {
		return nil
	}
	if f.c.DocErr != nil {
		return fmt.Errorf("the documents of %s could not be used: %w", f.c.Domain, f.c.DocErr)
	}
	userID, err := f.s.Store.FindUserID(ctx, f.c.Issuer)
	if err != nil {
		return err
	}
	agent, err := f.s.agent(ctx)
	if err != nil {
		return err
	}
	res, err := agent.SignOutUser(ctx, f.c.Auth, userID, false)
	f.Report.Revoked = res.Revoked
	return err
}

// Delete deletes everything the person holds at the Company and, for the
// one person of a single-user state, the translated API catalogs of its
// documents (shared by the people of a hosted state, and holding nothing
// of anyone's, they are kept there).
func (f *Forget) Delete(ctx context.Context) error {
	d, err := f.s.Store.Forget(ctx, f.c.Issuer)
	if err != nil {
		return err
	}
	f.Report.Forgotten = true
	f.Report.Deleted = ForgetCounts{UserID: d.UserID != "", Sessions: d.Sessions, Conversations: d.Conversations,
		SeenEvents: d.SeenEvents, Secrets: d.Secrets}
	if f.s.User != "" {
		return nil
	}
	var urls []string
	if f.c.Docs != nil {
		for _, a := range f.c.Docs.Document.APIs {
			urls = append(urls, a.URL)
		}
	}
	f.Report.Deleted.Catalogs, err = catalogstore.ForgetCompany(ctx, f.s.Root, urls, f.c.Domains)
	return err
}
