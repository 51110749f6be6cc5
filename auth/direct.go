// This file implements Direct Sign-In (Poppy 0.1 §4.5): the OAuth 2.0
// authorization code flow (RFC 6749 §4.1) with PKCE S256 (RFC 7636) and a
// random state, the iss check of RFC 9207, and the code exchange with the
// session_id, the client assertion and a DPoP proof.

package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// DirectSignIn is a started Direct Sign-In. Its URL is for the User's
// browser; the callback's query goes to Session.FinishDirect. The code
// verifier never leaves the agent except to the token endpoint. It is not
// changed after StartDirect returns, so it is safe to share.
type DirectSignIn struct {
	// URL is the authorization URL to open in the User's browser.
	URL string
	// State is the state sent; the callback must bring it back. It is a
	// one-time value, not a credential.
	State string
	// RedirectURI is where the Company sends the browser back.
	RedirectURI string
	// Scopes are the scopes requested.
	Scopes []string
	// Started is when the sign-in began, by the agent's clock.
	Started time.Time

	verifier Secret
}

// newVerifier returns a PKCE code verifier and its S256 challenge.
// RFC 7636 §4.1: "It is RECOMMENDED that the output of a suitable random
// number generator be used to create a 32-octet sequence. The octet
// sequence is then base64url-encoded to produce a 43-octet URL safe string
// to use as the code verifier."
func newVerifier() (verifier Secret, challenge string) {
	b := make([]byte, 32)
	rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	return NewSecret(v), s256(v)
}

// s256 is RFC 7636 §4.2: "code_challenge = BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))".
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// StartDirect builds the authorization URL of a Direct Sign-In for scopes,
// returning to redirectURI, which must be one of the agent's redirect_uris
// (Poppy 0.1 §4.1). Nothing is sent: the User's browser opens URL.
func (s *Session) StartDirect(redirectURI string, scopes []string) (*DirectSignIn, error) {
	if s.company.AuthorizationEndpoint == "" {
		return nil, errors.New("auth: the Company has no authorization_endpoint")
	}
	if err := checkScopes(scopes); err != nil {
		return nil, err
	}
	// Poppy 0.1 §4.5: "redirect_uri MUST exactly match an entry in the Personal Agent's redirect_uris (4.1)."
	if !slices.Contains(s.a.id.Metadata().RedirectURIs, redirectURI) {
		return nil, fmt.Errorf("auth: %q is not one of the agent's redirect_uris", redirectURI)
	}
	u, err := httpsURL("authorization_endpoint", s.company.AuthorizationEndpoint)
	if err != nil {
		return nil, err
	}
	verifier, challenge := newVerifier()
	// Poppy 0.1 §4.5: "The Personal Agent creates a random state and a PKCE code verifier"
	d := &DirectSignIn{State: randomID(), RedirectURI: redirectURI, Scopes: slices.Clone(scopes),
		Started: s.a.now(), verifier: verifier}
	q := u.Query() // RFC 6749 §3.1: the endpoint's own query "MUST be retained"
	q.Set("response_type", "code")
	q.Set("client_id", s.a.id.ClientID())
	q.Set("redirect_uri", redirectURI)
	q.Set("scope", strings.Join(scopes, " "))
	q.Set("state", d.State)
	q.Set("code_challenge", challenge)
	q.Set("code_challenge_method", "S256")
	u.RawQuery = q.Encode()
	d.URL = u.String()
	return d, nil
}

// FinishDirect takes the query of the callback to RedirectURI: it checks
// state and iss, and exchanges the code at the token endpoint, signing the
// Session in. A declined sign-in gives ErrAccessDenied; another error in the
// callback gives an *Error with its code.
func (s *Session) FinishDirect(ctx context.Context, d *DirectSignIn, callback url.Values) (*SignIn, error) {
	if err := s.checkCallback(d, callback); err != nil {
		return nil, err
	}
	code := callback.Get("code")
	if code == "" || len(callback["code"]) > 1 {
		return nil, errors.New("auth: the callback has no code")
	}
	sid := s.Info().ID
	tok, err := s.a.postToken(ctx, tokenRequest{endpoint: s.company.TokenEndpoint, proof: s.proof,
		form: func() (url.Values, error) {
			// Poppy 0.1 §4.5: "It then sends the code to the token_endpoint
			// with its client assertion, a DPoP Proof, and the session_id"
			return url.Values{
				"grant_type":    {"authorization_code"},
				"code":          {code},
				"redirect_uri":  {d.RedirectURI}, // RFC 6749 §4.1.3: REQUIRED when it was in the request
				"code_verifier": {d.verifier.Reveal()},
				"session_id":    {sid},
			}, nil
		}})
	if errors.Is(err, ErrAccountMismatch) {
		// Poppy 0.1 §4.4: "the Personal Agent starts a new Session". The
		// code is used up: a new Direct Sign-In signs the new Session in.
		if rerr := s.replace(ctx); rerr != nil {
			return nil, rerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("auth: exchange the authorization code: %w", err)
	}
	return s.finishSignIn(tok, d.Scopes)
}

// checkCallback checks the state and iss of a callback, and turns an error
// response into an *Error.
func (s *Session) checkCallback(d *DirectSignIn, cb url.Values) error {
	// RFC 6749 §10.12: the state binds the response to the request.
	if subtle.ConstantTimeCompare([]byte(cb.Get("state")), []byte(d.State)) != 1 || len(cb["state"]) != 1 {
		return errors.New("auth: the callback's state is not the one sent (RFC 6749 §10.12)")
	}
	// Poppy 0.1 §4.5: the Personal Agent "MUST check that iss exactly matches
	// the auth.issuer of the Company it started sign-in with."
	// RFC 9207 §2.4: "Clients MUST compare the value of the iss parameter to
	// the issuer value ... using simple string comparison"
	if cb.Get("iss") != s.company.Issuer || len(cb["iss"]) != 1 {
		return fmt.Errorf("auth: the callback's iss %q is not the Company's issuer %q (RFC 9207)", untrusted.Text(cb.Get("iss"), 300), s.company.Issuer)
	}
	if code := cb.Get("error"); code != "" {
		// Poppy 0.1 §4.5: "If the User declines, the redirect carries error=access_denied and iss instead."
		if !untrusted.Code(code) {
			code = "invalid_request"
		}
		return &Error{Code: code, Description: untrusted.Text(cb.Get("error_description"), 300)}
	}
	return nil
}

// String shows the sign-in without its code verifier.
func (d DirectSignIn) String() string {
	return fmt.Sprintf("auth.DirectSignIn{URL: %q, RedirectURI: %q, Scopes: %q}", d.URL, d.RedirectURI, d.Scopes)
}

// Format prints String for every verb, so no verb shows the code verifier.
func (d DirectSignIn) Format(f fmt.State, _ rune) { fmt.Fprint(f, d.String()) }
