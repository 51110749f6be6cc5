// This file implements Device Sign-In (Poppy 0.1 §4.6), the OAuth 2.0 device
// authorization grant of RFC 8628: the device authorization request with the
// client assertion, and the poll loop at the token endpoint, which quotes the
// sentences of RFC 8628 §3.5 it obeys.

package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// GrantDeviceCode is the grant_type of a device poll (RFC 8628 §3.4).
const GrantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

const (
	// defaultInterval is RFC 8628 §3.2's: "If no value is provided, clients
	// MUST use 5 as the default."
	defaultInterval = 5 * time.Second
	// slowDownStep is RFC 8628 §3.5's: "the interval MUST be increased by 5
	// seconds for this and all subsequent requests".
	slowDownStep = 5 * time.Second
	// maxInterval caps a hostile interval or growth by errors.
	maxInterval = 5 * time.Minute
	// maxDeviceLife caps a hostile expires_in.
	maxDeviceLife = 24 * time.Hour
)

// DeviceAuthorization is a started Device Sign-In: what the User needs to
// sign in, and, kept private, the device code. Show VerificationURI and
// UserCode, or VerificationURIComplete (Poppy 0.1 §4.6 step 2). It is not
// changed after StartDevice returns, so it is safe to share.
type DeviceAuthorization struct {
	// UserCode is the short code the User enters. Not a secret.
	UserCode string
	// VerificationURI is where the User enters it (HTTPS).
	VerificationURI string
	// VerificationURIComplete has the code in it; empty when the Company
	// gave none (RFC 8628 §3.2: OPTIONAL).
	VerificationURIComplete string
	// ExpiresAt is when the request expires, by the agent's clock.
	ExpiresAt time.Time
	// Interval is the wait before each poll; slow_down adds to it.
	Interval time.Duration
	// Scopes are the scopes requested.
	Scopes []string

	// deviceCode is never shown: Poppy 0.1 §4.6 "It keeps device_code private."
	deviceCode Secret
}

// deviceWire is the device authorization response (RFC 8628 §3.2).
type deviceWire struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               *int64 `json:"expires_in"`
	Interval                *int64 `json:"interval"`
}

// parseDeviceAuthorization checks a device authorization response body.
func parseDeviceAuthorization(body []byte, now time.Time) (*DeviceAuthorization, error) {
	var w deviceWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("auth: device authorization response: %w", err)
	}
	// RFC 8628 §3.2: device_code, user_code, verification_uri and expires_in are REQUIRED.
	switch {
	case w.DeviceCode == "" || len(w.DeviceCode) > 2048:
		return nil, errors.New("auth: device authorization response has no usable device_code")
	case w.UserCode == "" || !printable(w.UserCode) || len(w.UserCode) > 64:
		return nil, errors.New("auth: device authorization response has no usable user_code")
	case w.ExpiresIn == nil || *w.ExpiresIn <= 0:
		return nil, errors.New("auth: device authorization response has no positive expires_in")
	}
	if _, err := httpsURL("verification_uri", w.VerificationURI); err != nil {
		return nil, err
	}
	d := &DeviceAuthorization{UserCode: w.UserCode, VerificationURI: w.VerificationURI,
		Interval: defaultInterval, deviceCode: NewSecret(w.DeviceCode)}
	if w.VerificationURIComplete != "" {
		if _, err := httpsURL("verification_uri_complete", w.VerificationURIComplete); err != nil {
			return nil, err
		}
		d.VerificationURIComplete = w.VerificationURIComplete
	}
	life := time.Duration(min(*w.ExpiresIn, int64(maxDeviceLife/time.Second))) * time.Second
	d.ExpiresAt = now.Add(life)
	if w.Interval != nil && *w.Interval > 0 {
		d.Interval = time.Duration(min(*w.Interval, int64(maxInterval/time.Second))) * time.Second
	}
	return d, nil
}

// StartDevice starts a Device Sign-In for scopes at the Company's
// device_authorization_endpoint.
// Poppy 0.1 §4.6: "The Personal Agent sends the scopes it needs, with its client assertion".
func (s *Session) StartDevice(ctx context.Context, scopes []string) (*DeviceAuthorization, error) {
	if s.company.DeviceAuthorizationEndpoint == "" {
		return nil, errors.New("auth: the Company has no device_authorization_endpoint")
	}
	if err := checkScopes(scopes); err != nil {
		return nil, err
	}
	// Poppy 0.1 §4.4: "Each sign-in request MUST include scope as a space-separated string"
	form := url.Values{"scope": {strings.Join(scopes, " ")}}
	resp, body, err := s.a.postClientForm(ctx, s.company, s.company.DeviceAuthorizationEndpoint, form)
	if err != nil {
		return nil, fmt.Errorf("auth: device authorization: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !httpbody.IsJSON(resp.Header.Get("Content-Type")) {
		return nil, fmt.Errorf("auth: device authorization endpoint answered HTTP %d (%s)", resp.StatusCode, untrusted.Text(resp.Header.Get("Content-Type"), 300))
	}
	d, err := parseDeviceAuthorization(body, s.a.now())
	if err != nil {
		return nil, err
	}
	d.Scopes = slices.Clone(scopes)
	return d, nil
}

// checkScopes refuses an empty list and values that are not OAuth scope
// tokens (RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )).
func checkScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errors.New("auth: a sign-in needs at least one scope (Poppy 0.1 §4.4)")
	}
	for _, sc := range scopes {
		if sc == "" || !printable(sc) || strings.ContainsAny(sc, `"\`) {
			return fmt.Errorf("auth: %q is not a scope", untrusted.Text(sc, 300))
		}
	}
	return nil
}

// PollDevice waits for the User to finish a Device Sign-In and signs the
// Session in. It polls the token endpoint with the device code, the
// Session's current session_id, a fresh client assertion and a fresh DPoP
// proof each time, and stops for good on success, access_denied
// (ErrAccessDenied), expired_token (ErrExpiredToken) or once d has expired
// (ErrExpiredToken), never polling a code again after its final answer.
// A Session the Company ended, or one signed in to another account, is
// replaced by a new Session, which the approval then signs in.
func (s *Session) PollDevice(ctx context.Context, d *DeviceAuthorization) (*SignIn, error) {
	return s.pollDevice(ctx, d, d.Interval, pollHooks{})
}

// pollHooks are what a poller under a lease does beside polling: slowed
// keeps each new interval at once, so a poller that takes over can start
// from it, and ready runs before each request; an error of either stops
// polling (the lease is lost). A nil hook does nothing.
type pollHooks struct {
	slowed func(time.Duration) error
	ready  func() error
}

// pollDevice is PollDevice from interval, with h.
func (s *Session) pollDevice(ctx context.Context, d *DeviceAuthorization, interval time.Duration, h pollHooks) (*SignIn, error) {
	var wait *RetryAfterError
	for saved := interval; ; {
		if h.slowed != nil && interval != saved {
			if err := h.slowed(interval); err != nil {
				return nil, err
			}
			saved = interval
		}
		if err := s.beforePoll(ctx, d, interval, h); err != nil {
			return nil, err
		}
		tok, err := s.pollOnce(ctx, d)
		switch {
		case err == nil:
			return s.finishSignIn(tok, d.Scopes)
		case errors.Is(err, ErrAuthorizationPending):
			// RFC 8628 §3.5: "The client SHOULD repeat the access token request"
		case errors.Is(err, ErrSlowDown):
			// RFC 8628 §3.5: "the interval MUST be increased by 5 seconds for
			// this and all subsequent requests."
			interval = min(interval+slowDownStep, maxInterval)
		case errors.Is(err, ErrInvalidSession), errors.Is(err, ErrAccountMismatch):
			// Poppy 0.1 §4.2, §4.4: the Personal Agent starts a new Session.
			// The approval stands, so the next poll signs that one in.
			if err := s.replace(ctx); err != nil {
				return nil, err
			}
		case errors.As(err, &wait):
			// Poppy 0.1 §4.3: a 429 longer than the Agent waits: poll no sooner.
			interval = min(max(interval, wait.Wait), maxInterval)
		case isConnectionError(err):
			// RFC 8628 §3.5: "On encountering a connection timeout, clients
			// MUST unilaterally reduce their polling frequency before
			// retrying. The use of an exponential backoff algorithm to
			// achieve this, such as doubling the polling interval on each such
			// connection timeout, is RECOMMENDED."
			interval = min(2*interval, maxInterval)
		default:
			// access_denied: "The authorization request was denied.";
			// expired_token: "the device authorization session has concluded."
			// Poppy 0.1 §4.6: "The Personal Agent stops asking after either."
			return nil, err
		}
	}
}

// beforePoll waits out interval before the next poll of d, unless d
// expires first, then runs h.ready.
func (s *Session) beforePoll(ctx context.Context, d *DeviceAuthorization, interval time.Duration, h pollHooks) error {
	// RFC 8628 §3.5: "Before each new request, the client MUST wait at
	// least the number of seconds specified by the "interval" parameter
	// of the device authorization response (see Section 3.2), or 5
	// seconds if none was provided, and respect any increase in the
	// polling interval required by the "slow_down" error."
	if !s.a.now().Add(interval).Before(d.ExpiresAt) {
		return fmt.Errorf("auth: the device sign-in expired before the User finished: %w", ErrExpiredToken)
	}
	if err := s.a.limits.sleep(ctx, interval); err != nil {
		return err
	}
	if h.ready != nil {
		return h.ready()
	}
	return nil
}

// pollOnce sends one device_code grant for the Session as it is now.
func (s *Session) pollOnce(ctx context.Context, d *DeviceAuthorization) (*Token, error) {
	sid := s.Info().ID
	return s.a.postToken(ctx, tokenRequest{endpoint: s.company.TokenEndpoint, proof: s.proof,
		form: func() (url.Values, error) {
			return url.Values{
				"grant_type":  {GrantDeviceCode},
				"device_code": {d.deviceCode.Reveal()},
				// Poppy 0.1 §4.6: the poll carries "the session_id"
				"session_id": {sid},
			}, nil
		}})
}

// replace starts a new Session in place of the current one: signed out, as
// the sign-in under way will sign it in.
func (s *Session) replace(ctx context.Context) error {
	s.mu.Lock()
	s.account, s.narrow = nil, nil
	s.mu.Unlock()
	tok, err := s.request(ctx, "")
	if err != nil {
		return err
	}
	s.adopt(tok)
	return nil
}

// isConnectionError reports whether err is a failure to reach the Company
// rather than an answer from it or the caller's cancellation.
func isConnectionError(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// String shows what the User sees, never the device code.
func (d DeviceAuthorization) String() string {
	return fmt.Sprintf("auth.DeviceAuthorization{UserCode: %q, VerificationURI: %q, ExpiresAt: %s, Interval: %s, Scopes: %q}",
		d.UserCode, d.VerificationURI, d.ExpiresAt.Format(time.RFC3339), d.Interval, d.Scopes)
}

// Format prints String for every verb, so no verb shows the device code.
func (d DeviceAuthorization) Format(f fmt.State, _ rune) { fmt.Fprint(f, d.String()) }
