// This file implements what the sign-in types share (Poppy 0.1 §4.4): how a
// sign-in ends (an Account Token and a signed-in Session Token, with the
// granted scopes checked), signing a Session in with an Account Token held
// (§4.8), and signing out by revoking it (§4.9, RFC 7009). The types
// themselves are in device.go, direct.go and mediated.go.

package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
)

// SignIn is a finished sign-in: the Session is signed in. It is a value
// to read; Account is safe for concurrent use.
type SignIn struct {
	// Account is the Account Token issued, not yet kept anywhere: Keep it.
	// Nil when the Company issued none (the Session is signed in until it ends).
	Account *Account
	// Requested are the scopes asked for.
	Requested []string
	// Scopes are the scopes granted.
	// Poppy 0.1 §4.4: "The User may have approved fewer scopes than
	// requested, so the Personal Agent checks scope before continuing."
	Scopes []string
	// Missing are the requested scopes that were not granted.
	Missing []string
	// SessionID is the Session signed in. It differs from the Session's
	// earlier ID when a new Session had to be started (account_mismatch,
	// or an ended Session).
	SessionID string
}

// errSignedOut is returned when a sign-in answered with a signed-out token.
var errSignedOut = errors.New("auth: the sign-in returned a signed-out Session Token (Poppy 0.1 §4.4)")

// finishSignIn checks the token a sign-in returned and makes it the
// Session's: the Session is signed in with the new Account Token from now on.
func (s *Session) finishSignIn(tok *Token, requested []string) (*SignIn, error) {
	// Poppy 0.1 §4.4: "All three types end the same way: the Company returns
	// an Account Token as refresh_token, and a signed-in Session Token".
	if !tok.SignedIn {
		return nil, errSignedOut
	}
	res := &SignIn{Requested: slices.Clone(requested), Scopes: slices.Clone(tok.Scopes), SessionID: tok.SessionID}
	for _, sc := range requested {
		if !slices.Contains(tok.Scopes, sc) {
			res.Missing = append(res.Missing, sc)
		}
	}
	if !tok.RefreshToken.IsZero() {
		res.Account = newAccount(s.company.Issuer, s.userID, tok)
	}
	tok.RefreshToken = Secret{}
	s.mu.Lock()
	s.account, s.narrow = res.Account, nil
	// Without an Account Token the Session cannot be renewed signed in.
	s.stranded = res.Account == nil
	s.mu.Unlock()
	s.adopt(tok)
	return res, nil
}

// adopt makes tok the Session's token. Bearer tokens of the Session were
// issued for its earlier state, so they are requested anew.
// Poppy 0.1 §4.3: "Whenever the Personal Agent gets a new Session Token for
// a Session, it MUST use the new token from then on."
func (s *Session) adopt(tok *Token) {
	s.cell.set(tok)
	s.dropResourceTokens()
}

// signedInWith returns the Account Token the Session renews with, and the
// scopes asked for with it.
func (s *Session) signedInWith() (*Account, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.account, slices.Clone(s.narrow)
}

// leave stops using acct: the Session continues signed out.
func (s *Session) leave(acct *Account) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.account == acct {
		s.account, s.narrow = nil, nil
	}
}

// restore puts back prev and its scopes in place of acct, unless the
// Session has stopped using acct since.
func (s *Session) restore(acct, prev *Account, narrow []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.account == acct {
		s.account, s.narrow = prev, narrow
	}
}

// Account returns the Account Token the Session is signed in with, or nil.
func (s *Session) Account() *Account {
	acct, _ := s.signedInWith()
	return acct
}

// ErrAccountTokenRefused is returned when the Company refused a held Account
// Token (invalid_grant, Poppy 0.1 §4.8): it was dropped, and the Session
// continues signed out. It matches ErrInvalidGrant too.
var ErrAccountTokenRefused = fmt.Errorf("auth: the Company refused the Account Token (expired or revoked); the Session continues signed out: %w", ErrInvalidGrant)

// SignInWith signs the Session in with an Account Token held, asking for
// scopes (nil: all the Account Token grants). The Session is then renewed
// with it. A Session signed in to another account is replaced by a new
// signed-in Session (account_mismatch); a refused Account Token is dropped
// and gives ErrAccountTokenRefused.
// Poppy 0.1 §4.8: "With session_id, it gets a token for that Session,
// signing it in if it was signed out."
func (s *Session) SignInWith(ctx context.Context, acct *Account, scopes []string) error {
	if acct == nil {
		return errors.New("auth: SignInWith needs an Account")
	}
	s.mu.Lock()
	prev, prevNarrow := s.account, s.narrow
	s.account, s.narrow = acct, slices.Clone(scopes)
	s.mu.Unlock()
	used := s.cell.current()
	// Twice at most: a renewal already under way when the Account was set
	// may have been a signed-out one.
	for range 2 {
		tok, err := s.renewAfter(ctx, used)
		if err != nil {
			if ctx.Err() == nil {
				// A refusal other than invalid_grant (invalid_scope, ...) would
				// be sent again on every renewal: renew as before instead. A
				// canceled caller's renewal may still succeed, so it stays.
				s.restore(acct, prev, prevNarrow)
			}
			return err
		}
		if acct.Dropped() {
			return ErrAccountTokenRefused
		}
		if tok.SignedIn {
			s.adopt(tok)
			return nil
		}
		used = tok
	}
	return ErrAccountTokenRefused
}

// refreshGrant sends the refresh_token grant with the Account Token, for
// the Session sessionID ("" for a new signed-in Session), optionally for one
// resource and for fewer scopes (Poppy 0.1 §4.8).
func (s *Session) refreshGrant(ctx context.Context, acct *Account, sessionID, resource string, scopes []string, proof *ProofKey) (*Token, error) {
	return acct.refresh(ctx, func(ctx context.Context, rt Secret) (*Token, error) {
		return s.a.postToken(ctx, tokenRequest{endpoint: s.company.TokenEndpoint, proof: proof,
			form: func() (url.Values, error) {
				f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt.Reveal()}}
				if sessionID != "" {
					// Poppy 0.1 §4.8: "With session_id, it gets a token for that Session"
					f.Set("session_id", sessionID)
				}
				if len(scopes) > 0 {
					// Poppy 0.1 §4.8: "scope MAY ask for fewer scopes than the Account Token has"
					f.Set("scope", strings.Join(scopes, " "))
				}
				if resource != "" {
					// Poppy 0.1 §4.3: "MUST include resource set to the MCP server's url"
					f.Set("resource", resource)
				}
				return f, nil
			}})
	})
}

// StartSignedInSession starts a new Session already signed in with an
// Account Token held, asking for scopes (nil: all it grants). A refused
// Account Token is dropped; the new Session is then signed out and the error
// is ErrAccountTokenRefused, with the Session.
// Poppy 0.1 §4.8: "Without one, it starts a new Session that is already signed in".
func (a *Agent) StartSignedInSession(ctx context.Context, c Company, userID string, acct *Account, scopes []string) (*Session, error) {
	s, err := a.newSession(ctx, c, userID)
	if err != nil {
		return nil, err
	}
	s.account, s.narrow = acct, slices.Clone(scopes)
	tok, err := s.request(ctx, "")
	if err != nil {
		return nil, err
	}
	s.cell.set(tok)
	if !tok.SignedIn {
		return s, ErrAccountTokenRefused
	}
	return s, nil
}

// SignOut signs the User out at the Company (Poppy 0.1 §4.9): it revokes
// the Account Token the Session is signed in with and the one held for the
// User, when that is another, forgets them, and renews the Session signed
// out; when the Company ended the Session instead, a new one starts. The
// sign-out is counted in the store, so the User's other Sessions at the
// Company, in this process or any other sharing the store, continue signed
// out before their next request (elsewhere.go).
func (s *Session) SignOut(ctx context.Context) error {
	// No request of the Session follows another process's sign-out meanwhile.
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	held, err := s.Held(ctx)
	if err != nil {
		return err
	}
	acct := s.Account()
	revoke := []*Account{acct}
	if held != nil && (acct == nil || !sameToken(held, acct)) {
		revoke = append(revoke, held)
	}
	for _, t := range revoke {
		// Poppy 0.1 §4.9: "The Personal Agent revokes its Account Token at the
		// Company's revocation_endpoint (RFC 7009), with its client assertion"
		if t != nil {
			if err := s.a.Revoke(ctx, s.company, t); err != nil {
				return err
			}
		}
	}
	if held != nil && held != acct && acct != nil && sameToken(held, acct) {
		held.drop(ctx, held.store(), false) // the same token as the Session's, revoked with it
	}
	if acct != nil {
		s.leave(acct)
		// The Bearer and resource tokens are signed in: request them anew.
		s.dropResourceTokens()
	}
	if err := s.countSignOut(ctx); err != nil {
		return err
	}
	// Poppy 0.1 §4.9: "Usually those Sessions continue signed out ... the
	// Personal Agent renews them with its assertion (4.2)"
	return s.Renew(ctx)
}

// countSignOut records the Session's sign-out in the store, so that the
// other processes sharing it sign their Sessions of the User out too
// (elsewhere.go); the Session itself is in step with it. s.syncMu is held.
func (s *Session) countSignOut(ctx context.Context) error {
	if s.a.accounts == nil {
		return nil
	}
	g, err := s.a.accounts.CountSignOut(ctx, s.company.Issuer, true)
	if err != nil {
		return fmt.Errorf("auth: record the sign-out: %w", err)
	}
	// A forget counted meanwhile still ends the Session at its next request.
	g.Forgets = s.gen.Forgets
	s.gen = g
	return nil
}

// sameToken reports whether two Accounts hold the same Account Token.
func sameToken(a, b *Account) bool { return a.token().Reveal() == b.token().Reveal() }

// Revoke revokes an Account Token at the Company's revocation_endpoint with
// the client assertion (RFC 7009 §2.1, Poppy 0.1 §4.9), then drops it: it is
// removed from its store and no Session renews with it any more.
func (a *Agent) Revoke(ctx context.Context, c Company, acct *Account) error {
	if c.RevocationEndpoint == "" {
		return errors.New("auth: the Company has no revocation_endpoint; cannot sign out (Poppy 0.1 §4.9)")
	}
	// Held until the token is dropped, as for a refresh_token grant, so no
	// grant rotates it in between, here or in another process.
	acct.use.Lock()
	defer acct.use.Unlock()
	return withLease(ctx, acct.store(), leaseName(acct.issuer, acct.userID, acct.label), func(ctx context.Context, w AccountStore) error {
		return a.revokeLeased(ctx, w, c, acct)
	})
}

// revokeLeased is Revoke under the use lock and the lease, writing through
// w (fenced by the lease).
func (a *Agent) revokeLeased(ctx context.Context, w AccountStore, c Company, acct *Account) error {
	if !acct.Dropped() {
		// Another process may have rotated it: revoke the token in use now,
		// not one already replaced (which would leave the live one kept).
		// A dropped (replaced) Account keeps its own token, the one to revoke.
		if err := acct.reload(ctx); err != nil {
			return fmt.Errorf("auth: revoke the Account Token: %w", err)
		}
	}
	form := url.Values{
		"token": {acct.token().Reveal()},
		// RFC 7009 §2.1: token_type_hint "refresh_token"
		"token_type_hint": {"refresh_token"},
	}
	resp, _, err := a.postClientForm(ctx, c, c.RevocationEndpoint, form)
	if err != nil {
		return fmt.Errorf("auth: revoke the Account Token: %w", err)
	}
	// RFC 7009 §2.2: "The authorization server responds with HTTP status code
	// 200 if the token has been revoked successfully or if the client
	// submitted an invalid token."
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("auth: revoke the Account Token: revocation endpoint answered HTTP %d", resp.StatusCode)
	}
	acct.drop(context.WithoutCancel(ctx), w, false)
	return nil
}

// postClientForm posts a form with the agent's client assertion (RFC 7523
// §2.2) to one of the Company's OAuth endpoints other than the token
// endpoint, and returns the response with its body read. The assertion's
// aud is the token endpoint (RFC 7523 §3: "The token endpoint URL of the
// authorization server MAY be used as a value for an "aud" element"), a
// fresh one on each attempt; a 429 is waited out once when ctx allows, and
// an OAuth error body comes back as *Error.
func (a *Agent) postClientForm(ctx context.Context, c Company, endpoint string, form url.Values) (*http.Response, []byte, error) {
	ep, err := endpointKey(endpoint)
	if err != nil {
		return nil, nil, err
	}
	for retried := false; ; retried = true {
		if err := a.limits.wait(ctx, ep); err != nil {
			return nil, nil, err
		}
		resp, body, err := a.postClientOnce(ctx, c, endpoint, form)
		switch {
		case err != nil:
			return nil, nil, err
		case resp.StatusCode == http.StatusTooManyRequests && !retried:
			continue // Poppy 0.1 §4.3: wait at least Retry-After; limits.wait does
		case resp.StatusCode == http.StatusTooManyRequests:
			return nil, nil, a.limits.retryAfter(ep)
		case resp.StatusCode >= 400 && httpbody.IsJSON(resp.Header.Get("Content-Type")):
			if e := parseErrorBody(resp.StatusCode, resp.Header, body); e != nil {
				return nil, nil, e
			}
		}
		return resp, body, nil
	}
}

func (a *Agent) postClientOnce(ctx context.Context, c Company, endpoint string, form url.Values) (*http.Response, []byte, error) {
	ca, err := a.id.ClientAssertion(c.TokenEndpoint)
	if err != nil {
		return nil, nil, err
	}
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	f.Set("client_id", a.id.ClientID())
	f.Set("client_assertion_type", ClientAssertionType)
	f.Set("client_assertion", ca.Reveal())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(f.Encode()))
	if err != nil {
		return nil, nil, fmt.Errorf("auth: request to %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := a.tokenHTTP.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: request to %s: %w", redactURL(req.URL), err)
	}
	defer resp.Body.Close()
	a.observe(resp)
	body, err := httpbody.ReadAtMost(resp.Body, a.maxBody)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: response of %s: %w", redactURL(req.URL), err)
	}
	return resp, body, nil
}
