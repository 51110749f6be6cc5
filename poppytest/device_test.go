package poppytest_test

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

var userCodeRE = regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)

func TestDeviceSignIn(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{DeviceInterval: 1500 * time.Millisecond})
	sid := a.startSession().str("session_id")
	d := a.startDevice("poppy:read poppy:write")
	code, uc := d.str("device_code"), d.str("user_code")
	if !userCodeRE.MatchString(uc) || len(code) < 32 || d.str("verification_uri") != testVerifyURL ||
		d.str("verification_uri_complete") != testVerifyURL+"?user_code="+uc ||
		d.body["expires_in"] != 600.0 || d.body["interval"] != 2.0 || d.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("device authorization response %v", d.body)
	}
	c.Advance(2 * time.Second)
	wantError(t, "poll before approval", a.poll(code, sid), 400, "authorization_pending")

	// Poppy 0.1 §4.6: "Opening the link MUST NOT approve the request by itself."
	resp, page := getPage(t, s, d.str("verification_uri_complete"))
	if resp.StatusCode != 200 || !strings.Contains(page, "Raw Agent") || !strings.Contains(page, "poppy:write") ||
		!strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("verification page: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}
	c.Advance(2 * time.Second)
	wantError(t, "poll after opening the page", a.poll(code, sid), 400, "authorization_pending")

	if err := s.ApproveDevice(strings.ToLower(strings.ReplaceAll(uc, "-", "")), "acct_dana", "poppy:read"); err != nil {
		t.Fatal(err)
	}
	if err := s.ApproveDevice(uc, "acct_dana"); err == nil {
		t.Errorf("approving twice succeeded")
	}
	c.Advance(2 * time.Second)
	r := a.poll(code, sid)
	if r.status != 200 || r.str("scope") != "poppy:read" || r.str("session_id") != sid || r.body["signed_in"] != true ||
		!strings.HasPrefix(r.str("refresh_token"), "pat_") || r.str("token_type") != "DPoP" || r.body["refresh_token_expires_in"] != nil {
		t.Fatalf("approved poll: %d %v", r.status, r.body)
	}
	if secrets := s.IssuedSecrets(); !slices.Contains(secrets, code) || !slices.Contains(secrets, r.str("refresh_token")) || slices.Contains(secrets, uc) {
		t.Errorf("IssuedSecrets should hold the device_code and Account Token, not the user code")
	}
	who := a.whoami(r.str("access_token"), "")
	if who.body["signed_in"] != true || who.str("account") != "acct_dana" {
		t.Errorf("whoami after sign-in: %v", who.body)
	}
	acct := a.getWithToken(testAccountURL, r.str("access_token"))
	if acct.status != 200 || acct.str("account") != "acct_dana" || acct.str("email") != "dana@example.com" {
		t.Errorf("account endpoint: %d %v", acct.status, acct.body)
	}
	if got := s.SignedInSessions(); len(got) != 1 || got[0].ID != sid || got[0].Account != "acct_dana" {
		t.Errorf("SignedInSessions() = %+v", got)
	}
	if s.Served("account_token") != 1 || s.Served("authorization_pending") != 2 || s.Served("device_code") != 1 {
		t.Errorf("Served: account_token %d, authorization_pending %d, device_code %d",
			s.Served("account_token"), s.Served("authorization_pending"), s.Served("device_code"))
	}
	wantNoViolation(t, s, rt)

	c.Advance(2 * time.Second)
	wantError(t, "poll after success", a.poll(code, sid), 400, "invalid_grant")
	wantViolation(t, s, rt, "§4.6", "after its final answer")
}

func TestDeviceVerificationPage(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sid := a.startSession().str("session_id")
	d := a.startDevice("poppy:read poppy:write")
	uc := d.str("user_code")

	if resp, page := getPage(t, s, testVerifyURL); resp.StatusCode != 200 || !strings.Contains(page, `name="user_code"`) {
		t.Errorf("page without a code: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := getPage(t, s, testVerifyURL+"?user_code=BBBB-BBBB"); resp.StatusCode != 404 {
		t.Errorf("page of an unknown code: %d", resp.StatusCode)
	}
	form := url.Values{"user_code": {uc}, "email": {"dana@example.com"}, "password": {"wrong"},
		"scope": {"poppy:read"}, "action": {"approve"}}
	if resp, page := postPage(t, s, testVerifyURL, form); resp.StatusCode != 401 || !strings.Contains(page, "Wrong email or password") {
		t.Errorf("wrong password: %d\n%s", resp.StatusCode, page)
	}
	form.Set("password", "correct-horse-battery")
	form.Del("scope")
	if resp, _ := postPage(t, s, testVerifyURL, form); resp.StatusCode != 400 {
		t.Errorf("no scope ticked: %d", resp.StatusCode)
	}
	form.Set("scope", "poppy:write")
	if resp, page := postPage(t, s, testVerifyURL, form); resp.StatusCode != 200 || !strings.Contains(page, "Approved") {
		t.Fatalf("approve: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := getPage(t, s, d.str("verification_uri_complete")); resp.StatusCode != 409 {
		t.Errorf("page of an answered request: %d", resp.StatusCode)
	}
	c.Advance(time.Second)
	if r := a.poll(d.str("device_code"), sid); r.status != 200 || r.str("scope") != "poppy:write" {
		t.Errorf("poll after the page approved: %d %v", r.status, r.body)
	}

	d2 := a.startDevice("poppy:read")
	if resp, page := postPage(t, s, testVerifyURL, url.Values{"user_code": {d2.str("user_code")}, "action": {"deny"}}); resp.StatusCode != 200 || !strings.Contains(page, "declined") {
		t.Errorf("deny: %d\n%s", resp.StatusCode, page)
	}
	c.Advance(time.Second)
	wantError(t, "poll after the page declined", a.poll(d2.str("device_code"), sid), 400, "access_denied")
	wantNoViolation(t, s, rt)
}

func TestDeviceDeniedAndExpired(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sid := a.startSession().str("session_id")
	denied, expired, old := a.startDevice("poppy:read"), a.startDevice("poppy:read"), a.startDevice("poppy:read")
	if err := s.DenyDevice(denied.str("user_code")); err != nil {
		t.Fatal(err)
	}
	if err := s.ExpireDevice(expired.str("user_code")); err != nil {
		t.Fatal(err)
	}
	if s.DenyDevice("BBBB-BBBB") == nil || s.ExpireDevice("nope") == nil || s.ApproveDevice(old.str("user_code"), "acct_nobody") == nil {
		t.Errorf("controls accepted an unknown code or account")
	}
	c.Advance(time.Second)
	wantError(t, "declined", a.poll(denied.str("device_code"), sid), 400, "access_denied")
	wantError(t, "ExpireDevice", a.poll(expired.str("device_code"), sid), 400, "expired_token")
	c.Advance(10 * time.Minute)
	if s.ApproveDevice(old.str("user_code"), "acct_dana") == nil {
		t.Errorf("approved an expired request")
	}
	wantError(t, "past expires_in", a.poll(old.str("device_code"), sid), 400, "expired_token")
	wantNoViolation(t, s, rt)

	// Poppy 0.1 §4.6: "The Personal Agent stops asking after either."
	wantError(t, "poll after access_denied", a.poll(denied.str("device_code"), sid), 400, "invalid_grant")
	wantViolation(t, s, rt, "§4.6", "after its final answer")
}

func TestDeviceSlowDown(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sid := a.startSession().str("session_id")
	code := a.startDevice("poppy:read").str("device_code")

	// A poll faster than the interval gets slow_down (RFC 8628 §3.5), once without blame.
	c.Advance(200 * time.Millisecond)
	wantError(t, "too fast", a.poll(code, sid), 400, "slow_down")
	c.Advance(6 * time.Second) // the interval is now 1 s + 5 s
	wantError(t, "after the longer interval", a.poll(code, sid), 400, "authorization_pending")

	s.SlowDown(1)
	c.Advance(6 * time.Second)
	wantError(t, "SlowDown", a.poll(code, sid), 400, "slow_down")
	c.Advance(11 * time.Second)
	wantError(t, "after SlowDown", a.poll(code, sid), 400, "authorization_pending")
	if n := s.Served("slow_down"); n != 2 {
		t.Errorf("Served(slow_down) = %d, want 2", n)
	}
	wantNoViolation(t, s, rt)

	// RFC 8628 §3.5: after slow_down "the interval MUST be increased by 5 seconds for this and all subsequent requests".
	s.SlowDown(1)
	c.Advance(11 * time.Second)
	wantError(t, "SlowDown again", a.poll(code, sid), 400, "slow_down")
	c.Advance(11 * time.Second) // the old interval, not the new 16 s
	wantError(t, "slow_down ignored", a.poll(code, sid), 400, "slow_down")
	wantViolation(t, s, rt, "§4.6", "interval now")
}

func TestDeviceAutoApprove(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, &poppytest.Options{AutoApprove: &poppytest.AutoApproval{Account: "acct_sam", After: 3 * time.Second}})
	sid := a.startSession().str("session_id")
	code := a.startDevice("poppy:read poppy:write").str("device_code")
	c.Advance(time.Second)
	wantError(t, "before After", a.poll(code, sid), 400, "authorization_pending")
	c.Advance(2 * time.Second)
	r := a.poll(code, sid)
	if r.status != 200 || r.str("scope") != "poppy:read poppy:write" {
		t.Fatalf("auto-approved poll: %d %v", r.status, r.body)
	}
	if who := a.whoami(r.str("access_token"), ""); who.str("account") != "acct_sam" {
		t.Errorf("whoami %v", who.body)
	}
	wantNoViolation(t, s, rt)
}

func TestDeviceAccountMismatch(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sid := a.startSession().str("session_id")
	a.signInDevice(c, sid, "acct_dana", "poppy:read")
	d := a.startDevice("poppy:read")
	if err := s.ApproveDevice(d.str("user_code"), "acct_sam"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	// Poppy 0.1 §4.4: a Session "can't switch to another: the Company returns account_mismatch"
	wantError(t, "other account", a.poll(d.str("device_code"), sid), 400, "account_mismatch")
	other := a.startSession().str("session_id")
	c.Advance(time.Second)
	if r := a.poll(d.str("device_code"), other); r.status != 200 {
		t.Errorf("the approval in a new Session: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
}

func TestDeviceRejections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		send      func(a *rawAgent, c *clock, sid string) response
		status    int
		code      string
		violation string
	}{
		{"no scope", func(a *rawAgent, _ *clock, _ string) response {
			return a.postForm(testDeviceURL, a.clientForm(testClientID, nil), "")
		}, 400, "invalid_scope", "without scope"},
		{"scope of another type", func(a *rawAgent, _ *clock, _ string) response {
			return a.postForm(testDeviceURL, a.clientForm(testClientID, url.Values{"scope": {"addresses"}}), "")
		}, 400, "invalid_scope", ""},
		{"unknown scope", func(a *rawAgent, _ *clock, _ string) response {
			return a.postForm(testDeviceURL, a.clientForm(testClientID, url.Values{"scope": {"poppy:admin"}}), "")
		}, 400, "invalid_scope", ""},
		{"no client assertion", func(a *rawAgent, _ *clock, _ string) response {
			return a.postForm(testDeviceURL, url.Values{"scope": {"poppy:read"}, "client_id": {testClientID}}, "")
		}, 401, "invalid_client", "client_assertion_type"},
		{"poll without DPoP", func(a *rawAgent, c *clock, sid string) response {
			code := a.startDevice("poppy:read").str("device_code")
			c.Advance(time.Second)
			return a.postToken(a.clientForm(testClientID, url.Values{"grant_type": {grantDevice}, "device_code": {code},
				"session_id": {sid}, "resource": {testMCPURL}}), "")
		}, 400, "invalid_dpop_proof", "without a DPoP proof"},
		{"poll without session_id", func(a *rawAgent, c *clock, _ string) response {
			code := a.startDevice("poppy:read").str("device_code")
			c.Advance(time.Second)
			return a.poll(code, "")
		}, 400, "invalid_request", "without session_id"},
		{"poll without device_code", func(a *rawAgent, _ *clock, sid string) response {
			return a.poll("", sid)
		}, 400, "invalid_request", "without device_code"},
		{"unknown device_code", func(a *rawAgent, _ *clock, sid string) response {
			return a.poll("not-a-device-code-at-all", sid)
		}, 400, "invalid_grant", ""},
		{"another client's device_code", func(a *rawAgent, c *clock, sid string) response {
			code := a.startDevice("poppy:read").str("device_code")
			a.publishOther()
			c.Advance(time.Second)
			return a.postToken(a.clientForm(otherClientID, url.Values{"grant_type": {grantDevice},
				"device_code": {code}, "session_id": {sid}}), a.tokenProof())
		}, 400, "invalid_grant", "another client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, c := newSignInCompany(t, nil)
			sid := a.startSession().str("session_id")
			wantError(t, tc.name, tc.send(a, c, sid), tc.status, tc.code)
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, tc.violation)
			}
		})
	}
}
