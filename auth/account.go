// This file implements Account Tokens (Poppy 0.1 §4.8): the refresh token
// from sign-in, kept encrypted in an AccountStore and shared by every Session
// signed in with it. An Account is used by one refresh_token grant at a time,
// in this process and, under its lease (lease.go), in every process sharing
// the store, so a rotated token replaces the old one, persisted first, before
// anyone could send the old one again; a token the Company refuses with
// invalid_grant is dropped. Which Account is held for a User, and when it
// stands in for a sign-in, is held.go's.

package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// DefaultAccountLabel is the local label of a User's Account Token at a
// Company. The Company's token response names no account (Poppy 0.1 §4.4),
// so the agent keys Account Tokens by issuer, User and a label of its own:
// one Account Token per issuer and User, which a new sign-in replaces.
const DefaultAccountLabel = "default"

// AccountStore keeps Account Tokens encrypted, and the leases (see
// lease.go) that let one process at a time refresh, rotate, replace or
// revoke one, and the generations (elsewhere.go) through which a process
// learns of a sign-out or a forget done by another. *store.Store satisfies
// it.
type AccountStore interface {
	PutAccountToken(ctx context.Context, t store.AccountToken) error
	AccountToken(ctx context.Context, issuer, userID, account string) (store.AccountToken, error)
	DeleteAccountToken(ctx context.Context, issuer, userID, account string) error
	// AccountTokenUsed records that a grant used the Account Token now.
	AccountTokenUsed(ctx context.Context, issuer, userID, account string) error
	WaitLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error)
	ReleaseLease(ctx context.Context, l store.Lease) error
	// Fenced returns the view whose writes are done only while l is held.
	Fenced(l store.Lease) *store.Store
	Generation(ctx context.Context, issuer string) (store.Generation, error)
	CountSignOut(ctx context.Context, issuer string, revoked bool) (store.Generation, error)
}

// Account is one Account Token of a User at a Company (Poppy 0.1 §4.8) and
// what the agent knows of it. Its String, Format and MarshalJSON never show
// the token. It is safe for concurrent use.
type Account struct {
	issuer, userID, label string

	// use is held for the whole of each refresh_token grant, so the token
	// sent is always the latest (Poppy 0.1 §4.8: with rotation, "The
	// Personal Agent then MUST use the new one from then on").
	use sync.Mutex

	// mu guards everything below.
	mu        sync.Mutex
	tok       Secret
	scopes    []string
	expiresAt time.Time
	st        AccountStore // where it is kept; nil: memory only
	dropped   bool
	// refused says the Company refused it (Poppy 0.1 §4.9): invalid_grant,
	// or a Session just renewed with it still was not signed in.
	refused bool
}

// newAccount returns the Account Token a sign-in issued.
func newAccount(issuer, userID string, tok *Token) *Account {
	return &Account{issuer: issuer, userID: userID, label: DefaultAccountLabel,
		tok: tok.RefreshToken, scopes: slices.Clone(tok.Scopes), expiresAt: tok.RefreshExpiresAt}
}

// LoadAccount returns the Account Token kept in st for the User at the
// Company under label, or nil when there is none. Later rotations are kept
// in st too.
func LoadAccount(ctx context.Context, st AccountStore, issuer, userID, label string) (*Account, error) {
	t, err := st.AccountToken(ctx, issuer, userID, label)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: load Account Token: %w", err)
	}
	return &Account{issuer: issuer, userID: userID, label: label, tok: NewSecret(t.Token.RevealString()),
		scopes: t.Scopes, expiresAt: t.ExpiresAt, st: st}, nil
}

// Keep stores the Account Token in st under its label, replacing the one
// kept there, and keeps later rotations there too. Session.Hold does this
// for a sign-in, and revokes the token it replaces.
// Poppy 0.1 §4.8: "Personal Agents MUST store Account Tokens as secrets".
func (a *Account) Keep(ctx context.Context, st AccountStore) error { return a.keep(ctx, st, st) }

// keep is Keep writing through w: st under a lease (withLease).
func (a *Account) keep(ctx context.Context, st, w AccountStore) error {
	a.mu.Lock()
	a.st = st
	a.mu.Unlock()
	return a.save(ctx, w)
}

// retire stops every Session from signing in with the Account, once no
// grant with it is under way; it keeps its token, to be revoked.
func (a *Account) retire() {
	a.use.Lock()
	defer a.use.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropped = true
}

// save stores the Account through w, a view of where it is kept (fenced
// under a lease); nil: memory only.
func (a *Account) save(ctx context.Context, w AccountStore) error {
	a.mu.Lock()
	rec := a.record()
	a.mu.Unlock()
	if w == nil {
		return nil
	}
	if err := w.PutAccountToken(ctx, rec); err != nil {
		return fmt.Errorf("auth: keep Account Token: %w", err)
	}
	return nil
}

// record is the store's form of the Account; a.mu is held.
func (a *Account) record() store.AccountToken {
	return store.AccountToken{Issuer: a.issuer, UserID: a.userID, Account: a.label,
		Scopes: slices.Clone(a.scopes), ExpiresAt: a.expiresAt, Token: store.NewSecretString(a.tok.Reveal())}
}

// Label is the local name of the account (DefaultAccountLabel).
func (a *Account) Label() string { return a.label }

// Issuer is the auth.issuer of the Company that issued the Account Token.
func (a *Account) Issuer() string { return a.issuer }

// Scopes are the scopes the Account Token grants.
func (a *Account) Scopes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.scopes)
}

// ExpiresAt is when the Account Token expires; zero when the Company set no
// lifetime.
func (a *Account) ExpiresAt() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.expiresAt
}

// Covers reports whether the Account Token grants every one of scopes and
// has neither expired (by now) nor been dropped.
// Poppy 0.1 §4.4: "Before starting a new sign-in, the Personal Agent SHOULD
// check whether it already holds an Account Token that covers the task (4.8)."
func (a *Account) Covers(scopes []string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dropped || !a.expiresAt.IsZero() && !now.Before(a.expiresAt) {
		return false
	}
	for _, sc := range scopes {
		if !slices.Contains(a.scopes, sc) {
			return false
		}
	}
	return true
}

// Dropped reports whether the Company refused the Account Token
// (invalid_grant) or it was revoked: it is gone from the store and no
// Session signs in with it any more.
func (a *Account) Dropped() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dropped
}

// String names the account without its token.
func (a *Account) String() string {
	return fmt.Sprintf("auth.Account(%s at %s)", a.label, a.issuer)
}

// Format prints String for every verb, so no verb shows the token.
func (a *Account) Format(f fmt.State, _ rune) { fmt.Fprint(f, a.String()) }

// MarshalJSON gives the label and issuer only.
func (a *Account) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "%q", a.String()), nil
}

// errAccountDropped is returned by a grant with an Account already dropped.
var errAccountDropped = errors.New("auth: the Account Token was dropped")

// refresh runs one refresh_token grant with the Account Token: grant is
// called with the current token, under the use lock and, across processes
// sharing the store, its lease. A rotated token in the response replaces the
// current one and is stored before refresh returns (and before the lease is
// given back), so before the new Session Token is used and before another
// process can send the old one. invalid_grant drops the Account.
func (a *Account) refresh(ctx context.Context, grant func(ctx context.Context, tok Secret) (*Token, error)) (*Token, error) {
	a.use.Lock()
	defer a.use.Unlock()
	if a.Dropped() {
		return nil, errAccountDropped
	}
	var t *Token
	err := withLease(ctx, a.store(), leaseName(a.issuer, a.userID, a.label), func(ctx context.Context, w AccountStore) error {
		var err error
		t, err = a.refreshLeased(ctx, w, grant)
		return err
	})
	return t, err
}

// refreshLeased is refresh under the use lock and the lease, writing
// through w (fenced by the lease).
func (a *Account) refreshLeased(ctx context.Context, w AccountStore, grant func(ctx context.Context, tok Secret) (*Token, error)) (*Token, error) {
	// Another process may have rotated the token, or dropped it, since.
	if err := a.reload(ctx); err != nil {
		return nil, err
	}
	a.mu.Lock()
	tok, dropped := a.tok, a.dropped
	a.mu.Unlock()
	if dropped {
		return nil, errAccountDropped
	}
	t, err := grant(ctx, tok)
	if errors.Is(err, ErrInvalidGrant) {
		// Poppy 0.1 §4.8: "When the Account Token has expired or been revoked,
		// the Company returns invalid_grant. The Session continues signed out"
		a.drop(ctx, w, true)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if t.RefreshToken.IsZero() || t.RefreshToken.Reveal() == tok.Reveal() {
		a.used(ctx, w)
	} else {
		// Poppy 0.1 §4.8: "A Company MAY return a new Account Token in
		// refresh_token. The Personal Agent then MUST use the new one from then on."
		a.mu.Lock()
		a.tok = t.RefreshToken
		if !t.RefreshExpiresAt.IsZero() {
			a.expiresAt = t.RefreshExpiresAt
		}
		a.mu.Unlock()
		// Stored even if the caller gave up meanwhile: the old token is spent.
		if err := a.save(context.WithoutCancel(ctx), w); err != nil {
			return t, err
		}
	}
	t.RefreshToken = Secret{} // the Account holds it; Session Tokens travel without it
	return t, nil
}

// used records in the store that the Account Token was used now, for the
// User to see (poppy-mcp status). It is bookkeeping: a failure is ignored.
func (a *Account) used(ctx context.Context, w AccountStore) {
	if w != nil {
		_ = w.AccountTokenUsed(context.WithoutCancel(ctx), a.issuer, a.userID, a.label)
	}
}

// store returns where the Account is kept; nil: memory only.
func (a *Account) store() AccountStore {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// reload takes the Account Token kept in the store when another process
// (sharing the state directory) rotated it, and drops the Account when
// another process removed it (signed out, or found it refused), so a
// replaced or revoked token is not sent.
func (a *Account) reload(ctx context.Context) error {
	a.mu.Lock()
	st := a.st
	a.mu.Unlock()
	if st == nil {
		return nil
	}
	kept, err := st.AccountToken(ctx, a.issuer, a.userID, a.label)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrNotFound):
		a.dropped = true
	case err != nil:
		return fmt.Errorf("auth: read the Account Token: %w", err)
	case kept.Token.RevealString() != a.tok.Reveal():
		a.tok, a.scopes, a.expiresAt = NewSecret(kept.Token.RevealString()), kept.Scopes, kept.ExpiresAt
	}
	return nil
}

// drop forgets the Account Token, and removes it from the store unless the
// store already holds another one under the label (a newer sign-in, maybe
// by another process). refused says the Company refused it. It writes
// through w: where the Account is kept, fenced under its lease; nil:
// memory only.
func (a *Account) drop(ctx context.Context, w AccountStore, refused bool) {
	a.mu.Lock()
	a.dropped = true
	a.refused = a.refused || refused
	tok := a.tok
	a.mu.Unlock()
	if w == nil {
		return
	}
	kept, err := w.AccountToken(ctx, a.issuer, a.userID, a.label)
	if err == nil && kept.Token.RevealString() == tok.Reveal() {
		_ = w.DeleteAccountToken(ctx, a.issuer, a.userID, a.label)
	}
}

// Refused reports whether the Company refused the Account Token (Poppy 0.1
// §4.9: the User may have disconnected the agent): it is dropped, and never
// counts as covering a task again.
func (a *Account) Refused() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// token returns the current Account Token, for revocation.
func (a *Account) token() Secret {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tok
}
