package poppytest_test

import (
	"strings"
	"testing"
	"time"
)

// TestInspect: a harness sees the device sign-ins waiting (by user code,
// never the device code), the Direct Sign-Ins waiting for consent, the
// one-time codes sent, and the Served counts.
func TestInspect(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	sess := a.startSession()
	tok := sess.str("access_token")
	d := a.startDevice("poppy:read")
	reqs := s.DeviceRequests()
	if len(reqs) != 1 || reqs[0].UserCode != d.str("user_code") || reqs[0].Status != "pending" || reqs[0].ClientID != testClientID ||
		strings.Contains(mustMarshal(t, reqs), d.str("device_code")) {
		t.Errorf("device requests %+v", reqs)
	}
	if err := s.ApproveDevice(reqs[0].UserCode, "acct_dana"); err != nil {
		t.Fatal(err)
	}
	if r := s.DeviceRequests(); r[0].Status != "approved" || r[0].Account != "acct_dana" || r[0].Final {
		t.Errorf("approved: %+v", r)
	}
	c.Advance(time.Second)
	if p := a.poll(d.str("device_code"), sess.str("session_id")); p.status != 200 {
		t.Fatalf("poll after approval: %d %v", p.status, p.body)
	}
	if r := s.DeviceRequests(); !r[0].Final {
		t.Errorf("after the tokens were given: %+v", r)
	}
	r := a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42"))
	codes := s.SentCodes()
	if len(codes) != 1 || codes[0].SignInID != r.str("sign_in_id") || codes[0].Code != s.LastCode(r.str("sign_in_id")) ||
		codes[0].Account != "acct_sam" || codes[0].Finished {
		t.Errorf("sent codes %+v", codes)
	}
	c.Advance(11 * time.Minute)
	if s.SentCodes()[0].Finished != true || s.DeviceRequests()[0].Status != "approved" {
		t.Errorf("after expiry: %+v %+v", s.SentCodes(), s.DeviceRequests())
	}
	_, challenge := pkce()
	if resp, _ := getPage(t, s, authorizeURL("st_81", challenge, "poppy:read", nil)); resp.StatusCode != 200 {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	if ar := s.AuthorizationRequests(); len(ar) != 1 || ar[0].State != "st_81" || ar[0].ClientID != testClientID || ar[0].RedirectURI != testRedirectURI {
		t.Errorf("authorization requests %+v", ar)
	}
	if _, err := s.DenyAuthorization("st_81"); err != nil || len(s.AuthorizationRequests()) != 0 {
		t.Errorf("after the User declined: %v %+v", err, s.AuthorizationRequests())
	}
	if n := s.ServedCounts(); n["session_token"] != 2 || n["account_token"] != 1 || n["device_code"] != 1 { // the Session started, and the one the poll signed in
		t.Errorf("served %v", n)
	}
	wantNoViolation(t, s, rt)
}
