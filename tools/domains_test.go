package tools_test

import (
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// uk is the second domain of the Company of the multi-domain tests, under
// the same issuer as example.com (Poppy 0.1 §3.2).
const uk = "example.co.uk"

// twoDomainRun runs f at each MCP revision against a fresh harness whose
// Company has example.com and example.co.uk under one issuer, each with its
// own documents, once the Session was used through both domains.
func twoDomainRun(t *testing.T, f func(t *testing.T, h *harness, cs *sdk.ClientSession)) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, &poppytest.Options{OtherDomains: []string{uk}})
			t.Cleanup(h.tools.Close)
			cs := h.connect(t, rev)
			startBoth(t, h, cs)
			f(t, h, cs)
		})
	}
}

// startBoth starts the Session through example.com, then uses it through
// example.co.uk, and checks that it is one Session at the Company.
func startBoth(t *testing.T, h *harness, cs *sdk.ClientSession) {
	t.Helper()
	_, com := call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	res, co := call(t, cs, "start_session", map[string]any{"domain": uk})
	if res.IsError || co["session_id"] != com["session_id"] || co["domain"] != uk {
		t.Fatalf("start_session %s = %v, %s's was %v", uk, co, "example.com", com)
	}
	if n := len(h.company.Sessions()); n != 1 {
		t.Errorf("the Company has %d Sessions, want 1 (Poppy 0.1 §3.2: one Company)", n)
	}
}

// TestTwoDomainsWebsite: open_website on the second domain lands on that
// domain, through that domain's browser-session endpoint, in the one
// Session. On the old code the join page failed with HTTP 500: the
// assertion was checked against the first domain.
func TestTwoDomainsWebsite(t *testing.T) {
	t.Parallel()
	twoDomainRun(t, func(t *testing.T, h *harness, cs *sdk.ClientSession) {
		res, got := call(t, cs, "open_website", map[string]any{"domain": uk, "url": "/orders"})
		if res.IsError || got["url"] != "https://example.co.uk/orders" {
			t.Fatalf("open_website = %v", got)
		}
		p := openJoin(t, h, got["join_url"].(string))
		if p.status != http.StatusOK || p.action != "https://example.co.uk/poppy/browser-session" {
			t.Fatalf("join page: %d, posts to %q", p.status, p.action)
		}
		resp := postJoin(t, h, p)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "https://example.co.uk/orders" ||
			len(resp.Cookies()) != 1 || resp.Cookies()[0].Domain != uk {
			t.Fatalf("the Company answered %d, Location %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
		}
	})
}

// TestTwoDomainsTools: each domain's relayed MCP tools and API operations
// appear under that domain's own names, and calls of each reach that
// domain's servers; call_api and conversations on the second domain use
// its documents. On the old code only the first domain's were announced.
func TestTwoDomainsTools(t *testing.T) {
	t.Parallel()
	twoDomainRun(t, func(t *testing.T, h *harness, cs *sdk.ClientSession) {
		wantOwnTools(t, cs, h.company) // example.com's
		want := []string{"example_co_uk_mcp_store_info", "example_co_uk_api_getStoreInfo", "example_co_uk_mcp_search_products"}
		var listed map[string]*sdk.Tool
		waitUntil(t, "the second domain's tools", func() bool {
			listed = listTools(t, cs)
			return listed[want[0]] != nil && listed[want[1]] != nil && listed[want[2]] != nil
		})
		for _, gone := range []string{"example_com_api_getStoreInfo", "example_com_mcp_store_info", "example_co_uk_mcp_count_slowly"} {
			if listed[gone] != nil {
				t.Errorf("%s is listed: one domain's documents were used for another", gone)
			}
		}
		if res, got := call2(t, cs, want[0], nil); res.IsError || !strings.Contains(got, uk) {
			t.Errorf("%s: %s", want[0], got)
		}
		if res, got := call(t, cs, want[1], nil); res.IsError || !strings.Contains(got["body"].(string), `"domain":"example.co.uk"`) {
			t.Errorf("%s: %v", want[1], got)
		}
		if res, got := call(t, cs, "call_api", map[string]any{"domain": uk, "operation": "getStoreInfo"}); res.IsError || got["status"] != 200.0 {
			t.Errorf("call_api getStoreInfo at %s: %v", uk, got)
		}
		if res, got := call(t, cs, "send_message", map[string]any{"domain": uk, "text": "Hello"}); res.IsError {
			t.Errorf("send_message at %s: %v", uk, got)
		}
		if h.company.Count("api."+uk, "/poppy/conversations") == 0 {
			t.Errorf("the conversation did not start at %s's endpoint", uk)
		}
		if n := len(h.company.Sessions()); n != 1 {
			t.Errorf("the Company has %d Sessions, want 1", n)
		}
	})
}

// TestTwoDomainsMediated: Mediated Sign-In on the second domain sends the
// credentials to that domain's auth.mediated.endpoint and signs the one
// Session in. On the old code they went to the first domain's endpoint.
func TestTwoDomainsMediated(t *testing.T) {
	t.Parallel()
	twoDomainRun(t, func(t *testing.T, h *harness, cs *sdk.ClientSession) {
		res, got := call(t, cs, "sign_in_mediated", map[string]any{"domain": uk, "scopes": []string{"poppy:read"}})
		u, _ := got["sign_in_url"].(string)
		if res.IsError || u == "" || !strings.Contains(textOf(res), "auth.example.co.uk") {
			t.Fatalf("sign_in_mediated = %v: %s", got, textOf(res))
		}
		b := newUserBrowser(t, h.local)
		if page := b.fillCredentials(u, "dana@example.com", "correct-horse-battery"); !strings.Contains(page, "signed in") {
			t.Fatalf("after the credentials: %s", page)
		}
		if n, m := h.company.Count("auth."+uk, "/poppy/sign-in"), h.company.Count("auth.example.com", "/poppy/sign-in"); n == 0 || m != 0 {
			t.Errorf("credentials posted %d times to auth.%s and %d times to auth.example.com", n, uk, m)
		}
		if _, st := call(t, cs, "sign_in_status", map[string]any{"domain": "example.com"}); st["signed_in"] != true {
			t.Errorf("sign_in_status at example.com after signing in at %s: %v", uk, st)
		}
		if n := len(h.company.SignedInSessions()); n != 1 || len(h.company.Sessions()) != 1 {
			t.Errorf("%d signed-in Sessions of %d, want the one", n, len(h.company.Sessions()))
		}
	})
}
