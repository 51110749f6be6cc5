// This file implements token requests at the Company's token endpoint
// (RFC 6749 §3.2, §4.1.3, §5; RFC 7523; Poppy 0.1 §4.2-4.3, §4.8): one
// straight attempt, postTokenOnce, and the small policy around it, postToken.

package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Token is what a token endpoint issued. Its secrets redact themselves.
type Token struct {
	// AccessToken is the Session Token.
	AccessToken Secret
	// Type is "DPoP", or "Bearer" for a token requested without a proof.
	Type string
	// ExpiresAt is when the token expires, by the agent's clock.
	ExpiresAt time.Time
	// Lifetime is expires_in.
	Lifetime time.Duration
	// RefreshToken is the Account Token, when one was issued (Poppy 0.1 §4.4).
	RefreshToken Secret
	// RefreshExpiresAt is when the Account Token expires; zero when unknown.
	RefreshExpiresAt time.Time
	// Scopes are the account scopes granted; none for a signed-out token.
	Scopes []string
	// SessionID identifies the Session. It is not a credential.
	SessionID string
	// SignedIn says whether the Session is signed in to an account.
	SignedIn bool
}

// tokenWire is a successful token response (RFC 6749 §5.1, Poppy 0.1 §4.2, §4.4).
type tokenWire struct {
	AccessToken           string `json:"access_token"`
	TokenType             string `json:"token_type"`
	ExpiresIn             *int64 `json:"expires_in"`
	RefreshToken          string `json:"refresh_token"`
	RefreshTokenExpiresIn int64  `json:"refresh_token_expires_in"`
	Scope                 string `json:"scope"`
	SessionID             string `json:"session_id"`
	SignedIn              bool   `json:"signed_in"`
}

// maxLifetime caps expires_in so a hostile value cannot overflow time.
const maxLifetime = 366 * 24 * time.Hour

// parseToken checks and converts a token response body. wantType is "DPoP"
// or "Bearer".
func parseToken(body []byte, wantType string, now time.Time) (*Token, error) {
	var w tokenWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("auth: token response: %w", err)
	}
	if w.AccessToken == "" {
		return nil, errors.New("auth: token response has no access_token")
	}
	// RFC 6749 §5.1: token_type "is case insensitive".
	// Poppy 0.1 §4.2: "token_type is DPoP, or Bearer for a token requested without a proof (4.3)."
	if !strings.EqualFold(w.TokenType, wantType) {
		return nil, fmt.Errorf("auth: token response has token_type %q, want %s", untrusted.Text(w.TokenType, 300), wantType)
	}
	// Poppy 0.1 §4.2: "The Company chooses the value, and it MUST be greater than 0."
	if w.ExpiresIn == nil || *w.ExpiresIn <= 0 {
		return nil, errors.New("auth: token response has no positive expires_in (Poppy 0.1 §4.2)")
	}
	if !printable(w.SessionID) {
		return nil, errors.New("auth: token response has a malformed session_id")
	}
	life := min(time.Duration(min(*w.ExpiresIn, int64(maxLifetime/time.Second)))*time.Second, maxLifetime)
	t := &Token{
		AccessToken:  NewSecret(w.AccessToken),
		Type:         wantType,
		ExpiresAt:    now.Add(life),
		Lifetime:     life,
		RefreshToken: NewSecret(w.RefreshToken),
		Scopes:       strings.Fields(w.Scope), // Poppy 0.1 §4.2: "a space-separated string"
		SessionID:    w.SessionID,
		SignedIn:     w.SignedIn,
	}
	if w.RefreshToken != "" && w.RefreshTokenExpiresIn > 0 {
		rl := time.Duration(min(w.RefreshTokenExpiresIn, int64(maxLifetime/time.Second))) * time.Second
		t.RefreshExpiresAt = now.Add(rl)
	}
	return t, nil
}

// printable reports whether s is short visible ASCII (IDs we echo back).
func printable(s string) bool {
	if len(s) > 512 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// tokenRequest is one request to a token endpoint.
type tokenRequest struct {
	endpoint string
	// form builds the grant's parameters; it is called again for every
	// attempt so that assertions in it are fresh.
	form func() (url.Values, error)
	// proof signs DPoP proofs; nil asks for a Bearer token (Poppy 0.1 §4.3).
	proof *ProofKey
}

// errRateLimited is postTokenOnce's answer to a 429; the limit is recorded.
var errRateLimited = errors.New("auth: rate limited")

// postToken sends a token request with the retry policy: at once with a new
// proof and new assertions on use_dpop_nonce, and once after a 429's
// Retry-After when the caller's deadline allows.
func (a *Agent) postToken(ctx context.Context, tr tokenRequest) (*Token, error) {
	ep, err := endpointKey(tr.endpoint)
	if err != nil {
		return nil, err
	}
	nonceRetried, rateRetried := false, false
	for {
		if err := a.limits.wait(ctx, ep); err != nil {
			return nil, err
		}
		tok, err := a.postTokenOnce(ctx, tr)
		switch {
		// RFC 9449 §8: retry once, at once, with the nonce just received; the
		// retry carries a new client assertion, as a replayed one is refused.
		case errors.Is(err, ErrUseDPoPNonce) && tr.proof != nil && !nonceRetried:
			nonceRetried = true
		// Poppy 0.1 §4.3: "The Personal Agent MUST wait at least that long
		// before sending the request again." limits.wait does the waiting.
		case errors.Is(err, errRateLimited) && !rateRetried:
			rateRetried = true
		case errors.Is(err, errRateLimited):
			return nil, a.limits.retryAfter(ep)
		default:
			return tok, err
		}
	}
}

// postTokenOnce makes one straight attempt.
func (a *Agent) postTokenOnce(ctx context.Context, tr tokenRequest) (*Token, error) {
	form, err := tr.form()
	if err != nil {
		return nil, err
	}
	// RFC 7523 §2.2 client authentication, fresh for every attempt.
	ca, err := a.id.ClientAssertion(tr.endpoint)
	if err != nil {
		return nil, err
	}
	form.Set("client_id", a.id.ClientID())
	form.Set("client_assertion_type", ClientAssertionType)
	form.Set("client_assertion", ca.Reveal())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tr.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("auth: token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if tr.proof != nil {
		// Poppy 0.1 §4.3: "signs a new proof for every request, including token requests"
		p, err := tr.proof.Proof(http.MethodPost, tr.endpoint, Secret{}, a.nonces.get(origin(req.URL)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("DPoP", p)
	}
	resp, err := a.tokenHTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: token request to %s: %w", redactURL(req.URL), err)
	}
	defer resp.Body.Close()
	return a.readTokenResponse(resp, tr)
}

func (a *Agent) readTokenResponse(resp *http.Response, tr tokenRequest) (*Token, error) {
	a.observe(resp)
	if resp.StatusCode == http.StatusTooManyRequests {
		return nil, errRateLimited
	}
	body, err := httpbody.ReadAtMost(resp.Body, a.maxBody)
	if err != nil {
		return nil, fmt.Errorf("auth: token response: %w", err)
	}
	jsonType := httpbody.IsJSON(resp.Header.Get("Content-Type"))
	if resp.StatusCode == http.StatusOK && jsonType {
		want := "DPoP"
		if tr.proof == nil {
			want = "Bearer"
		}
		return parseToken(body, want, a.now())
	}
	if jsonType {
		if e := parseErrorBody(resp.StatusCode, resp.Header, body); e != nil {
			return nil, e
		}
	}
	if e := challengeError("DPoP", resp.StatusCode, resp.Header); e != nil {
		return nil, e
	}
	if resp.StatusCode/100 == 3 {
		// RFC 6749 §3.2 has no redirects; following one would hand the
		// assertions to another URL.
		return nil, fmt.Errorf("auth: token endpoint redirected (HTTP %d); not followed", resp.StatusCode)
	}
	return nil, fmt.Errorf("auth: token endpoint answered HTTP %d (%s)", resp.StatusCode, untrusted.Text(resp.Header.Get("Content-Type"), 300))
}

// observe keeps what every response teaches: the origin's DPoP nonce and
// a 429's Retry-After.
func (a *Agent) observe(resp *http.Response) {
	if resp.Request == nil || resp.Request.URL == nil {
		return
	}
	// RFC 9449 §8.2: "the client MUST use the new nonce value supplied for subsequent requests"
	a.nonces.set(origin(resp.Request.URL), resp.Header.Get("DPoP-Nonce"))
	if resp.StatusCode == http.StatusTooManyRequests {
		ep := endpointOf(resp.Request.URL)
		a.limits.set(ep, parseRetryAfter(resp.Header.Get("Retry-After"), a.now()))
	}
}

// redactURL drops the query, user info and fragment of u for messages.
func redactURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return v.String()
}

// drain reads a little of a dropped body, so the connection can be reused,
// and closes it.
func drain(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// replayBody returns a fresh copy of buffered bytes.
func replayBody(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}
