// This file keeps what an Agent holds in step with what other processes
// sharing its store did to a User at a Company: a sign-out (`poppy-mcp
// sign-out`, or the sign_out tool of another poppy-mcp) revoked the Account
// Token and deleted it (Poppy 0.1 §4.9), or `poppy-mcp forget` deleted
// everything held there, the User ID included. Each is counted in the
// store's generation of the User at the Company, which a Session reads (one
// row, by key) before every request it sends and a holding before it hands
// out its Account Token: a Session signed in with a token that is gone is
// renewed signed out before the request goes, and a forgotten Session is
// not used again. It also runs those sign-outs from outside a Session
// (SignOutUser).

package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// ChangeSignedOutElsewhere: the User was signed out at the Company by
// another process sharing the store (`poppy-mcp sign-out`, or another
// poppy-mcp's sign_out): the Session, signed in before, continues signed
// out (or, when the Account Token could not be revoked and the Company
// still has it signed in, a new signed-out Session took its place).
const ChangeSignedOutElsewhere Change = "signed_out_elsewhere"

// ErrForgotten is returned for a request of a Session whose User's state at
// the Company was forgotten by another process (`poppy-mcp forget`): its
// User ID is gone, and the Session must not be used again. Open a new one.
var ErrForgotten = errors.New("auth: everything held for the User at this Company was forgotten (poppy-mcp forget): open a new Session")

// generation returns the User's generation at the Company issuer; zero
// without a store, where no other process can change anything.
func (a *Agent) generation(ctx context.Context, issuer string) (store.Generation, error) {
	if a.accounts == nil {
		return store.Generation{}, nil
	}
	g, err := a.accounts.Generation(ctx, issuer)
	if err != nil {
		return store.Generation{}, fmt.Errorf("auth: read what other processes did at the Company: %w", err)
	}
	return g, nil
}

// Gone reports whether everything held for the Session's User at its
// Company was forgotten by another process since the Session opened
// (`poppy-mcp forget`): the Session must not be used again; open a new one,
// for the new User ID the store gives. A store that cannot be read says
// false; the Session's next request fails with its error.
func (s *Session) Gone(ctx context.Context) bool {
	g, err := s.a.generation(ctx, s.company.Issuer)
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	return err == nil && g.Forgets != s.gen.Forgets
}

// sync brings the Session in step with the store before it is used: after
// a sign-out elsewhere, an Account Token that is gone from the store is
// dropped here too and the Session, signed in with nothing left to keep it
// so, is renewed signed out; after a forget, it fails with ErrForgotten.
func (s *Session) sync(ctx context.Context) error {
	g, err := s.a.generation(ctx, s.company.Issuer)
	if err != nil {
		return err
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	switch {
	case g == s.gen:
		return nil
	case g.Forgets != s.gen.Forgets:
		return ErrForgotten
	}
	if err := s.followSignOut(ctx, g.Unrevoked != s.gen.Unrevoked); err != nil {
		return err
	}
	s.gen = g
	return nil
}

// followSignOut follows a sign-out done elsewhere; s.syncMu is held. The
// Account Token the Session is signed in with, when the store no longer
// keeps it, is dropped here too (one the store still keeps came from a
// sign-in after the sign-out, and stays). A Session left signed in with no
// Account Token is renewed signed out: Poppy 0.1 §4.9: "The Company revokes
// the Account Token and signs out every Session signed in with it ... the
// Personal Agent renews them with its assertion (4.2)". When the token was
// deleted without being revoked, the Company still has the Session signed
// in, and renewing it with the assertion would break §4.2 ("A signed-in
// Session is renewed with the Account Token instead"): a new signed-out
// Session takes its place.
func (s *Session) followSignOut(ctx context.Context, unrevoked bool) error {
	if acct := s.Account(); acct != nil {
		if err := acct.reload(ctx); err != nil {
			return err
		}
		if !acct.Dropped() {
			return nil
		}
		s.leave(acct)
	}
	if tok := s.cell.current(); tok == nil || !tok.SignedIn {
		return nil
	}
	s.mu.Lock()
	s.stranded = s.stranded || unrevoked
	s.mu.Unlock()
	s.dropResourceTokens()
	s.note(ChangeSignedOutElsewhere)
	return s.Renew(ctx)
}

// SignOutResult is what SignOutUser did.
type SignOutResult struct {
	// Held says an Account Token was held for the User.
	Held bool
	// Revoked says the Company revoked it (RFC 7009 §2.2: HTTP 200).
	Revoked bool
	// Deleted says it is no longer kept, revoked or not.
	Deleted bool
	// Scopes are the scopes it granted.
	Scopes []string
}

// SignOutUser signs the User out at the Company from outside any Session,
// as `poppy-mcp sign-out` does (Poppy 0.1 §4.9): it revokes the Account
// Token held for the User at the Company's revocation_endpoint (RFC 7009)
// under the token's lease, deletes it, and counts the sign-out in the store,
// so that every process holding a Session for the User there continues
// signed out before its next request. When the revocation fails, nothing
// changes and the error says why, unless force is set: the token is then
// deleted anyway, and the sign-out counted as one the Company did not see.
// With no Account Token held, the sign-out is still counted: a Session
// signed in without one (the Company issued none) continues signed out too.
func (a *Agent) SignOutUser(ctx context.Context, c Company, userID string, force bool) (SignOutResult, error) {
	if a.accounts == nil {
		return SignOutResult{}, errors.New("auth: SignOutUser needs a store")
	}
	acct, err := LoadAccount(ctx, a.accounts, c.Issuer, userID, DefaultAccountLabel)
	if err != nil {
		return SignOutResult{}, err
	}
	res := SignOutResult{Held: acct != nil}
	var rerr error
	if acct != nil {
		res.Scopes = acct.Scopes()
		rerr = a.Revoke(ctx, c, acct)
		res.Revoked = rerr == nil
	}
	if rerr != nil && !force {
		return res, rerr
	}
	if rerr != nil {
		err = withLease(ctx, a.accounts, leaseName(c.Issuer, userID, DefaultAccountLabel), func(ctx context.Context, w AccountStore) error {
			return w.DeleteAccountToken(ctx, c.Issuer, userID, DefaultAccountLabel)
		})
		if err != nil {
			return res, fmt.Errorf("auth: delete the Account Token: %w", err)
		}
	}
	res.Deleted = acct != nil
	if _, err := a.accounts.CountSignOut(ctx, c.Issuer, rerr == nil); err != nil {
		return res, fmt.Errorf("auth: record the sign-out: %w", err)
	}
	return res, rerr
}
