package poppytest_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// flawProbe sends the one request a flaw changes the answer to, and says
// whether the answer shows the flaw.
type flawProbe func(t *testing.T, a *convAgent) bool

// TestFlaws: each flaw makes the Server answer one wrong request as a
// flawed Company would, and the same request is answered as the spec says
// by a Server without it. So a tool that checks Companies can be tested
// against each rule broken alone.
func TestFlaws(t *testing.T) {
	accepted := func(r response) bool { return r.status/100 == 2 }
	withAssertion := func(mut func(c map[string]any)) flawProbe {
		return func(t *testing.T, a *convAgent) bool {
			f := a.grantForm(nil)
			f.Set("assertion", a.sessionAssertion("JWT", mut))
			return accepted(a.postToken(f, a.tokenProof()))
		}
	}
	withProof := func(proof func(a *convAgent) string) flawProbe {
		return func(t *testing.T, a *convAgent) bool {
			return accepted(a.call("GET", testWhoamiURL, "DPoP", a.token, proof(a)))
		}
	}
	const resource = "https://api.example.com/store"
	for _, tc := range []struct {
		name  string
		flaws poppytest.Flaws
		probe flawProbe
	}{
		{"ReplayedAssertions", poppytest.Flaws{ReplayedAssertions: true}, func(t *testing.T, a *convAgent) bool {
			first := a.grantForm(nil)
			if r := a.postToken(first, a.tokenProof()); r.status != 200 {
				t.Fatalf("first use: %d %v", r.status, r.body)
			}
			again := a.grantForm(nil)
			again.Set("assertion", first.Get("assertion"))
			return accepted(a.postToken(again, a.tokenProof()))
		}},
		{"ArrayAudience", poppytest.Flaws{ArrayAudience: true}, withAssertion(func(c map[string]any) { c["aud"] = []string{testTokenURL} })},
		{"AnyAudience", poppytest.Flaws{AnyAudience: true}, withAssertion(func(c map[string]any) { c["aud"] = "https://other.invalid/oauth/token" })},
		{"ExpiredAssertions", poppytest.Flaws{ExpiredAssertions: true}, withAssertion(func(c map[string]any) {
			c["iat"], c["exp"] = c["iat"].(int64)-600, c["iat"].(int64)-300
		})},
		{"ForeignIssuer", poppytest.Flaws{ForeignIssuer: true}, withAssertion(func(c map[string]any) { c["iss"] = "https://other.invalid/agent.json" })},
		{"RenewalDropsSessionID", poppytest.Flaws{RenewalDropsSessionID: true}, func(t *testing.T, a *convAgent) bool {
			r := a.postToken(a.grantForm(url.Values{"session_id": {a.sessionID}}), a.tokenProof())
			return r.status == 200 && r.body["session_id"] == nil
		}},
		{"CacheableTokens", poppytest.Flaws{CacheableTokens: true}, func(t *testing.T, a *convAgent) bool {
			return a.startSession().header.Get("Cache-Control") == ""
		}},
		{"AnyNonce", poppytest.Flaws{AnyNonce: true}, func(t *testing.T, a *convAgent) bool {
			return accepted(a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "made-up-nonce", nil)))
		}},
		{"IgnoreHTM", poppytest.Flaws{IgnoreHTM: true}, withProof(func(a *convAgent) string {
			return a.proof("POST", testWhoamiURL, a.token, "", nil)
		})},
		{"IgnoreHTU", poppytest.Flaws{IgnoreHTU: true}, withProof(func(a *convAgent) string {
			return a.proof("GET", "https://api.example.com/elsewhere", a.token, "", nil)
		})},
		{"AnyProofKey", poppytest.Flaws{AnyProofKey: true}, withProof(func(a *convAgent) string {
			return a.proofWith(newKey(t), "GET", testWhoamiURL, a.token, "", nil)
		})},
		{"MissingProof", poppytest.Flaws{MissingProof: true}, withProof(func(*convAgent) string { return "" })},
		{"BearerAnywhere", poppytest.Flaws{BearerAnywhere: true}, func(t *testing.T, a *convAgent) bool {
			return accepted(a.call("GET", testWhoamiURL, "Bearer", a.token, ""))
		}},
		{"QueryTokens", poppytest.Flaws{QueryTokens: true}, func(t *testing.T, a *convAgent) bool {
			return accepted(a.call("GET", testWhoamiURL+"?access_token="+url.QueryEscape(a.token), "", "",
				a.proof("GET", testWhoamiURL, a.token, "", nil)))
		}},
		{"AnyResource", poppytest.Flaws{AnyResource: true}, func(t *testing.T, a *convAgent) bool {
			r := a.postToken(a.grantForm(url.Values{"session_id": {a.sessionID}, "resource": {resource}}), a.tokenProof())
			if r.status != 200 {
				t.Fatalf("resource token: %d %v", r.status, r.body)
			}
			return accepted(a.getWithToken(testWhoamiURL, r.str("access_token")))
		}},
		{"UnknownScopeInvalidRequest", poppytest.Flaws{UnknownScopeInvalidRequest: true}, func(t *testing.T, a *convAgent) bool {
			r := a.postForm(testDeviceURL, a.clientForm(testClientID, url.Values{"scope": {"no-such-scope"}}), "")
			return r.status == 400 && r.str("error") == "invalid_request"
		}},
		{"MediatedWithoutToken", poppytest.Flaws{MediatedWithoutToken: true}, func(t *testing.T, a *convAgent) bool {
			req, _ := http.NewRequest(http.MethodPost, testMediatedURL, strings.NewReader(`{"scope":"poppy:read","credentials":{}}`))
			req.Header.Set("Content-Type", "application/json")
			r := a.do(req)
			return r.status != 401 && r.header.Get("WWW-Authenticate") == ""
		}},
		{"ExtraScopes", poppytest.Flaws{ExtraScopes: true}, func(t *testing.T, a *convAgent) bool {
			a.signIn("acct_dana", "poppy:read")
			for _, sess := range a.s.Sessions() {
				if sess.ID == a.sessionID {
					return slices.Contains(sess.Scopes, "poppy:write")
				}
			}
			t.Fatal("no Session")
			return false
		}},
		{"DuplicateMessages", poppytest.Flaws{DuplicateMessages: true}, func(t *testing.T, a *convAgent) bool {
			m := msg("hello twice")
			first, again := a.start(m), a.start(m)
			return first.str("conversation_id") != again.str("conversation_id")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, flawed := range []bool{false, true} {
				o := &poppytest.Options{OpenAPIResource: resource}
				if flawed {
					o.Flaws = tc.flaws
				}
				_, _, a := newConvCompany(t, o)
				if got := tc.probe(t, a); got != flawed {
					t.Errorf("flaw set %v: the answer shows the flaw: %v", flawed, got)
				}
			}
		})
	}
}
