package poppytest_test

// Tests of Options.OtherDomains: one Company, one issuer, several domains
// with documents of their own (Poppy 0.1 §3.2). Each proves the knob works,
// and that an agent that uses one domain's documents for another fails.

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const (
	ukDomain     = "example.co.uk"
	ukBrowserURL = "https://example.co.uk/poppy/browser-session"
	ukOrdersURL  = "https://example.co.uk/orders"
	ukMCPURL     = "https://mcp.example.co.uk/mcp"
	ukMediated   = "https://auth.example.co.uk/poppy/sign-in"
)

func newTwoDomains(t *testing.T) (*poppytest.Server, *recordingT, *rawAgent) {
	t.Helper()
	s, rt, a, _ := newTestCompany(t, &poppytest.Options{OtherDomains: []string{"Example.co.uk", "example.com", ""}})
	return s, rt, a
}

// TestOtherDomainsDocuments: the metadata lists both domains; each domain's
// poppy.json names the one issuer, its own domain and endpoints on its own
// hosts; the second domain's store API has its own document.
func TestOtherDomainsDocuments(t *testing.T) {
	s, rt, _ := newTwoDomains(t)
	if got := s.Domains(); !slices.Equal(got, []string{"example.com", ukDomain}) {
		t.Fatalf("Domains = %v", got)
	}
	md := getJSON(t, s, "https://auth.example.com/.well-known/oauth-authorization-server")
	if got := md["poppy_domains"]; len(got.([]any)) != 2 || got.([]any)[1] != ukDomain {
		t.Errorf("poppy_domains = %v", got)
	}
	for _, host := range []string{ukDomain, "www." + ukDomain} {
		doc := getJSON(t, s, "https://"+host+"/.well-known/poppy.json")
		auth := doc["auth"].(map[string]any)
		if doc["organization"].(map[string]any)["domain"] != ukDomain || auth["issuer"] != s.Issuer() ||
			auth["mediated"].(map[string]any)["endpoint"] != ukMediated ||
			doc["web"].(map[string]any)["browser_session_endpoint"] != ukBrowserURL {
			t.Errorf("poppy.json at %s: %v", host, doc)
		}
		apis := doc["apis"].([]any)
		if apis[0].(map[string]any)["url"] != "https://api.example.co.uk/openapi.json" || apis[1].(map[string]any)["url"] != ukMCPURL {
			t.Errorf("apis at %s: %v", host, apis)
		}
	}
	uk, com := getJSON(t, s, "https://api.example.co.uk/openapi.json"), getJSON(t, s, "https://api.example.com/openapi.json")
	if uk["paths"].(map[string]any)["/info"] == nil || com["paths"].(map[string]any)["/info"] != nil ||
		uk["servers"].([]any)[0].(map[string]any)["url"] != "https://api.example.co.uk/store" {
		t.Errorf("the store documents do not differ as they should: %v", uk["servers"])
	}
	rmd := getJSON(t, s, "https://mcp.example.co.uk/.well-known/oauth-protected-resource/mcp")
	if rmd["resource"] != ukMCPURL || rmd["authorization_servers"].([]any)[0] != s.Issuer() {
		t.Errorf("resource metadata: %v", rmd)
	}
	wantNoViolation(t, s, rt)
}

// TestOtherDomainsOneSession: one Session works on every domain's APIs, and
// each domain's MCP server takes only Bearer tokens issued for its url and
// has its own tools.
func TestOtherDomainsOneSession(t *testing.T) {
	s, rt, a := newTwoDomains(t)
	ses := a.startSession()
	sid, tok := ses.str("session_id"), ses.str("access_token")
	info := a.call("GET", "https://api.example.co.uk/store/info", "DPoP", tok, a.proof("GET", "https://api.example.co.uk/store/info", tok, "", nil))
	if info.status != 200 || info.str("domain") != ukDomain {
		t.Fatalf("getStoreInfo: %d %v", info.status, info.body)
	}
	m := &mcpClient{a: a, url: ukMCPURL, token: a.bearerToken(sid, ukMCPURL)}
	m.initialize()
	names, _ := m.toolNames()
	slices.Sort(names)
	if !slices.Equal(names, []string{"order_status", "search_products", "store_info"}) {
		t.Errorf("tools of %s: %v", ukMCPURL, names)
	}
	if got := m.call("store_info", nil).result(); !strings.Contains(anyText(got), ukDomain) {
		t.Errorf("store_info: %v", got)
	}
	if n := len(s.Sessions()); n != 1 {
		t.Errorf("%d Sessions, want 1", n)
	}
	wantNoViolation(t, s, rt)
	other := &mcpClient{a: a, url: testMCPURL, token: m.token}
	if r := other.rpc("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}}, false); r.status != http.StatusUnauthorized {
		t.Errorf("%s's token at %s: %d", ukMCPURL, testMCPURL, r.status)
	}
	wantViolation(t, s, rt, "4.3", "issued for resource")
}

func anyText(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x + " ")
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

// TestOtherDomainsWebsite: the second domain's endpoint joins a browser for
// a page on that domain, with a cookie for that domain; an assertion for a
// page on the first domain posted there is refused and reported.
func TestOtherDomainsWebsite(t *testing.T) {
	s, rt, a := newTwoDomains(t)
	sid := a.startSession().str("session_id")
	ukAssertion := func(returnTo string) string {
		return a.browserAssertion(sid, func(c map[string]any) { c["aud"], c["return_to"] = ukBrowserURL, returnTo })
	}
	resp, body := postBrowserTo(t, s, ukBrowserURL, ukAssertion(ukOrdersURL))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != ukOrdersURL ||
		len(resp.Cookies()) != 1 || resp.Cookies()[0].Domain != ukDomain {
		t.Fatalf("join at %s: %d %v %s", ukDomain, resp.StatusCode, resp.Cookies(), body)
	}
	if page := sitePage(t, s, ukOrdersURL, resp.Cookies()[0]); !strings.Contains(page, sid) {
		t.Errorf("the second domain's page does not know the Session:\n%s", page)
	}
	wantNoViolation(t, s, rt)
	if resp, _ := postBrowserTo(t, s, ukBrowserURL, ukAssertion(testOrdersURL)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("return_to on example.com posted to %s: %d", ukBrowserURL, resp.StatusCode)
	}
	wantViolation(t, s, rt, "§5", "not an https URL on "+ukDomain)
}

// postBrowserTo is postBrowser to another endpoint.
func postBrowserTo(t *testing.T, s *poppytest.Server, endpoint, assertion string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(url.Values{"assertion": {assertion}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return noRedirect(t, s, req)
}

// TestOtherDomainsMediated: credentials posted to the second domain's
// mediated endpoint sign the one Session in; the one-time code must go to
// that endpoint too, and one sent to the first domain's is reported.
func TestOtherDomainsMediated(t *testing.T) {
	s, rt, a := newTwoDomains(t)
	tok := a.startSession().str("access_token")
	creds := map[string]any{"scope": "poppy:read", "credentials": map[string]any{"email": "sam@example.com", "password": "sam-secret-42"}}
	r := a.postJSON(ukMediated, tok, "application/json", creds)
	id := r.str("sign_in_id")
	if r.str("status") != "code_required" || id == "" {
		t.Fatalf("mediated at %s: %d %v", ukMediated, r.status, r.body)
	}
	wrong := a.postJSON(testMediatedURL+"/"+id, tok, "application/json", map[string]any{"code": s.LastCode(id)})
	if wrong.str("status") != "failed" {
		t.Errorf("the code sent to %s: %v", testMediatedURL, wrong.body)
	}
	wantViolation(t, s, rt, "4.7", "started at auth.example.co.uk was sent to auth.example.com")
	done := a.postJSON(ukMediated+"/"+id, tok, "application/json", map[string]any{"code": s.LastCode(id)})
	if done.str("status") != "complete" || len(s.SignedInSessions()) != 1 {
		t.Errorf("the code sent to %s: %d %v", ukMediated, done.status, done.body)
	}
}
