package poppytest_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestViolationRecords: a violation is recorded as data (section, rule,
// code, and the request's method, host and path with a summary), reported
// to T with the same words as Violations gives, and shows no secret: not
// the Session Token the agent put in a URL, nor its assertions. On the old
// code violations were strings only (ViolationRecords did not exist).
func TestViolationRecords(t *testing.T) {
	s, rt := newRecorded(t, nil)
	a := newAgent(t, s, time.Now)
	tok := a.startSession().str("access_token")
	if tok == "" {
		t.Fatal("no Session Token")
	}
	// A token in the URL (§4.3), sent with a proper proof and header too.
	u := testWhoamiURL + "?access_token=" + url.QueryEscape(tok) + "&lang=en"
	a.call("GET", u, "DPoP", tok, a.proof("GET", testWhoamiURL, tok, "", nil))
	// A token request whose client_assertion_type is wrong (§4.1).
	form := a.grantForm(url.Values{"client_assertion_type": {"urn:wrong"}})
	a.postToken(form, a.proof("POST", testTokenURL, "", "", nil))

	recs := s.ViolationRecords()
	if len(recs) != 2 {
		t.Fatalf("violations %v, want 2", s.Violations())
	}
	inURL, client := recs[0], recs[1]
	if inURL.Seq != 1 || inURL.Section != "4.3" || inURL.Code != "" ||
		inURL.Request != (poppytest.ViolationRequest{Method: "GET", Host: "api.example.com", Path: "/poppy/whoami",
			Summary: "query access_token=[redacted]&lang=[redacted]; Authorization DPoP [redacted] (1 header(s)); DPoP proofs 1"}) {
		t.Errorf("token in URL: %+v", inURL)
	}
	if client.Seq != 2 || client.Section != "4.1" || client.Code != "invalid_client" ||
		client.Request.Method != "POST" || client.Request.Path != "/oauth/token" ||
		!strings.Contains(client.Request.Summary, "client_assertion=[redacted]") ||
		!strings.Contains(client.Request.Summary, "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer") ||
		!strings.Contains(client.Request.Summary, "assertion=[redacted]") {
		t.Errorf("client assertion: %+v", client)
	}
	errs := rt.Errors()
	for i, v := range recs {
		if i >= len(errs) || errs[i] != v.String() || s.Violations()[i] != v.String() {
			t.Errorf("T got %q, Violations %q, the record says %q", errs, s.Violations(), v)
		}
	}
	all := errs
	for _, v := range recs {
		all = append(all, v.Rule, v.Request.Summary)
	}
	for _, secret := range s.IssuedSecrets() {
		for _, text := range all {
			if len(secret) >= 8 && strings.Contains(text, secret) {
				t.Errorf("a violation shows a secret: %q", text)
			}
		}
	}
}

// TestViolationRuleRedacted: a rule that would quote what the agent sent
// (here a client_id that is a Session Token the Company issued) shows it
// redacted, to T and in the record.
func TestViolationRuleRedacted(t *testing.T) {
	s, rt := newRecorded(t, nil)
	a := newAgent(t, s, time.Now)
	tok := a.startSession().str("access_token")
	form := a.grantForm(url.Values{"client_id": {tok}})
	req, _ := http.NewRequest(http.MethodPost, testTokenURL, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", a.proof("POST", testTokenURL, "", "", nil))
	a.do(req)
	recs := s.ViolationRecords()
	if len(recs) != 1 || !strings.Contains(recs[0].Rule, `client_id "[redacted]" differs`) {
		t.Fatalf("violations %v", s.Violations())
	}
	if strings.Contains(rt.Errors()[0], tok) || strings.Contains(recs[0].Request.Summary, tok) {
		t.Errorf("the Session Token shows: %q", rt.Errors())
	}
}
