package poppytest

// This file implements Device Sign-In (Poppy 0.1 §4.6), the OAuth 2.0 device
// authorization grant of RFC 8628: the device authorization endpoint, the
// device_code grant at the token endpoint, and the controls tests and demos
// use in place of a person. The verification page is in consent.go.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// deviceFlow is sign-in's concern of Device Sign-In (Poppy 0.1 §4.6, RFC
// 8628). Its fields are guarded by the Server's mu.
type deviceFlow struct {
	*Server
	devices   map[string]*deviceRequest
	userCodes map[string]*deviceRequest
	slowDowns int // polls still to answer slow_down (SlowDown)
}

const (
	grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"
	verifyPath      = "/device"
	// deviceCodeLife is the expires_in of a device request (the spec's example).
	deviceCodeLife = 10 * time.Minute
	// userCodeAlphabet is RFC 8628 §6.1's base-20 set: no vowels, no lookalikes.
	userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"
	// slowDownStep is how much each slow_down adds to the interval (RFC 8628 §3.5).
	slowDownStep = 5 * time.Second
	// pollSlack is how much sooner than the interval a poll may arrive
	// before it counts as too fast, for agents that time from the request.
	pollSlack = 250 * time.Millisecond
)

// AutoApproval approves device sign-ins without a person, for demos: the
// first poll at least After past the device request finds it approved for
// Account with every scope requested.
type AutoApproval struct {
	Account string        // such as "acct_dana"
	After   time.Duration // zero: the first poll finds it approved
}

// deviceStatus is what the User decided about a device request.
type deviceStatus int

const (
	devicePending deviceStatus = iota
	deviceApproved
	deviceDenied
)

// deviceRequest is one device authorization request. Its fields change
// under mu, except those set when it is made.
type deviceRequest struct {
	deviceCode string
	userCode   string
	client     *client
	scopes     []string // requested
	created    time.Time
	expires    time.Time
	interval   time.Duration // grows by slowDownStep with each slow_down
	lastPoll   time.Time     // of the last poll, or created
	slowedDown bool          // the last answer was slow_down
	status     deviceStatus
	account    string   // approved for
	granted    []string // approved scopes
	final      bool     // a final answer was given: tokens, access_denied or expired_token
}

// installDevice registers the device authorization endpoint, the
// verification page and the device_code grant.
func (s *deviceFlow) installDevice() {
	auth := "auth." + s.domain
	s.HandleFunc(auth, "POST "+devicePath, s.handleDeviceAuthorization)
	s.HandleFunc(auth, "GET "+verifyPath, s.handleVerifyPage)
	s.HandleFunc(auth, "POST "+verifyPath, s.handleVerifyPost)
	s.grants[grantDeviceCode] = s.deviceCodeGrant
}

// deviceInterval is Options.DeviceInterval in whole seconds, at least one.
func (s *deviceFlow) deviceInterval() time.Duration {
	d := s.opts.DeviceInterval
	if d <= 0 {
		return 5 * time.Second // RFC 8628 §3.2: "If no value is provided, clients MUST use 5 as the default."
	}
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// handleDeviceAuthorization starts a device request (Poppy 0.1 §4.6 step 1,
// RFC 8628 §3.1, §3.2).
func (s *deviceFlow) handleDeviceAuthorization(w http.ResponseWriter, r *http.Request) {
	form, e := s.readForm(r)
	var c *client
	if e == nil {
		// Poppy 0.1 §4.6: "The Personal Agent sends the scopes it needs, with its client assertion"
		c, e = s.authenticateClient(r, form, s.URL("auth."+s.domain, devicePath))
	}
	var scopes []string
	if e == nil {
		scopes, e = s.requestedScopes(r, "4.6", "device", form.Get("scope"), form.Has("scope"))
	}
	if e != nil {
		s.writeTokenError(w, e)
		return
	}
	now := s.timeNow()
	d := &deviceRequest{deviceCode: randomString(32), client: c, scopes: scopes, created: now,
		expires: now.Add(deviceCodeLife), interval: s.deviceInterval(), lastPoll: now}
	s.mu.Lock()
	for d.userCode == "" || s.userCodes[d.userCode] != nil {
		d.userCode = newUserCode()
	}
	s.devices[d.deviceCode] = d
	s.userCodes[d.userCode] = d
	s.mu.Unlock()
	s.addSecret(d.deviceCode)
	s.countServed("device_code")
	verify := s.URL("auth."+s.domain, verifyPath)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               d.deviceCode,
		"user_code":                 d.userCode,
		"verification_uri":          verify,
		"verification_uri_complete": verify + "?user_code=" + d.userCode,
		"expires_in":                int64(deviceCodeLife / time.Second),
		"interval":                  int64(d.interval / time.Second),
	})
}

// newUserCode is eight characters of userCodeAlphabet as XXXX-XXXX.
func newUserCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	out := make([]byte, 0, 9)
	for i, v := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, userCodeAlphabet[int(v)%len(userCodeAlphabet)]) // 256 % 20 bias is fine for a test server
	}
	return string(out)
}

// normalizeUserCode uppercases a user code and drops what is not in the
// alphabet, such as the dash (RFC 8628 §6.1), then puts the dash back.
func normalizeUserCode(raw string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(raw) {
		if strings.ContainsRune(userCodeAlphabet, r) {
			b.WriteRune(r)
		}
	}
	c := b.String()
	if len(c) != 8 {
		return c
	}
	return c[:4] + "-" + c[4:]
}

// deviceCodeGrant answers a poll (Poppy 0.1 §4.6 step 3, RFC 8628 §3.4, §3.5).
func (s *deviceFlow) deviceCodeGrant(_ context.Context, req *tokenRequest) (*grantResult, *oauthError) {
	code := req.form.Get("device_code")
	if code == "" {
		return nil, s.agentBug(req.r, "4.6", "invalid_request", "device_code grant without device_code")
	}
	sid, e := s.checkSignInGrant("4.6", req)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	d := s.devices[code]
	ref := s.pollLocked(d, req.client.id, s.timeNow())
	var account string
	var scopes []string
	if ref == nil {
		d.final = true // taken now, so two polls at once cannot both sign in
		account, scopes = d.account, d.granted
	}
	s.mu.Unlock()
	if ref != nil {
		return nil, ref.answer(s.Server, req.r, "4.6")
	}
	res, _, e := s.signInSession(req.r, "4.6", sid, req.client.id, account, scopes)
	if e != nil {
		s.mu.Lock()
		d.final = false // the approval stands: the agent may poll again for another Session
		s.mu.Unlock()
	}
	return res, e
}

// pollLocked decides a poll of d by the client at now. It returns nil when
// d is approved and may sign in. The caller holds mu.
func (s *deviceFlow) pollLocked(d *deviceRequest, clientID string, now time.Time) *refusal {
	switch {
	case d == nil:
		return &refusal{code: "invalid_grant", desc: "unknown device_code"}
	case d.client.id != clientID:
		return &refusal{code: "invalid_grant", desc: "the device_code was issued to another client", bug: true}
	case d.final:
		// Poppy 0.1 §4.6: "The Personal Agent stops asking after either."
		return &refusal{code: "invalid_grant", desc: "device_code polled again after its final answer", bug: true}
	case !now.Before(d.expires):
		d.final = true
		// Poppy 0.1 §4.6: "if the request runs past expires_in, expired_token"
		return &refusal{code: "expired_token", desc: "the device request expired"}
	}
	if a := s.opts.AutoApprove; a != nil && d.status == devicePending && !now.Before(d.created.Add(a.After)) {
		d.status, d.account, d.granted = deviceApproved, a.Account, d.scopes
	}
	tooFast := now.Sub(d.lastPoll)+pollSlack < d.interval
	ignored := tooFast && d.slowedDown
	if tooFast || s.slowDowns > 0 {
		if !tooFast {
			s.slowDowns--
		}
		elapsed := now.Sub(d.lastPoll)
		d.interval += slowDownStep // RFC 8628 §3.5: "the interval MUST be increased by 5 seconds for this and all subsequent requests"
		d.lastPoll, d.slowedDown = now, true
		desc := fmt.Sprintf("poll %s after the last, interval now %s", elapsed.Round(time.Millisecond), d.interval)
		// RFC 8628 §3.5: after slow_down the client MUST wait the increased interval
		return &refusal{code: "slow_down", desc: desc, bug: ignored}
	}
	d.lastPoll, d.slowedDown = now, false
	switch d.status {
	case devicePending:
		return &refusal{code: "authorization_pending", desc: "the User has not finished"}
	case deviceDenied:
		d.final = true
		return &refusal{code: "access_denied", desc: "the User declined"} // Poppy 0.1 §4.6: "If the User declines, it returns access_denied"
	}
	return nil
}

// deviceByUserCodeLocked returns the device request of a user code; the
// caller holds mu.
func (s *deviceFlow) deviceByUserCodeLocked(userCode string) (*deviceRequest, error) {
	d := s.userCodes[normalizeUserCode(userCode)]
	if d == nil {
		return nil, fmt.Errorf("poppytest: no device request with user code %q", userCode)
	}
	return d, nil
}

// errDecided is returned for a device request the User already decided, or
// that expired.
var errDecided = errors.New("poppytest: the request was already approved, declined or expired")

// withDevice runs f on the device request of userCode under mu. With
// pending set, a request already answered or expired gets errDecided.
func (s *deviceFlow) withDevice(userCode string, pending bool, f func(d *deviceRequest) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.deviceByUserCodeLocked(userCode)
	switch {
	case err != nil:
		return err
	case pending && (d.status != devicePending || !s.timeNow().Before(d.expires)):
		return errDecided
	}
	return f(d)
}

// ApproveDevice approves the device request of userCode for account, as the
// User does on the verification page, with scopes: some or all of those
// requested, or all of them when none are given.
func (s *deviceFlow) ApproveDevice(userCode, account string, scopes ...string) error {
	if _, ok := s.accountByID(account); !ok {
		return fmt.Errorf("poppytest: no account %q", account)
	}
	return s.withDevice(userCode, true, func(d *deviceRequest) error {
		granted, err := grantedScopes(d.scopes, scopes)
		if err == nil {
			d.status, d.account, d.granted = deviceApproved, account, granted
		}
		return err
	})
}

// DenyDevice declines the device request of userCode, as the User does on
// the verification page: the next poll gets access_denied.
func (s *deviceFlow) DenyDevice(userCode string) error {
	return s.withDevice(userCode, true, func(d *deviceRequest) error {
		d.status = deviceDenied
		return nil
	})
}

// ExpireDevice makes the device request of userCode expire now: the next
// poll gets expired_token.
func (s *deviceFlow) ExpireDevice(userCode string) error {
	return s.withDevice(userCode, false, func(d *deviceRequest) error {
		d.expires = s.timeNow()
		return nil
	})
}

// SlowDown makes the next n polls of any device request get slow_down, as
// RFC 8628 §3.5 lets a Company ask at any time. Each slow_down adds five
// seconds to that request's interval, which the agent must then wait.
func (s *deviceFlow) SlowDown(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slowDowns = n
}
