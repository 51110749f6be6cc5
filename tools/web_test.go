package tools_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// joinPage is what a join_url served.
type joinPage struct {
	status    int
	header    http.Header
	body      string
	action    string // where the form posts
	assertion string // the posted assertion
}

var (
	formAction     = regexp.MustCompile(`<form id="join" method="post" action="([^"]+)"`)
	assertionInput = regexp.MustCompile(`<input type="hidden" name="assertion" value="([^"]+)">`)
	scriptNonce    = regexp.MustCompile(`<script nonce="([^"]+)">`)
)

// openJoin GETs a join_url the way the agent's browser would.
func openJoin(t *testing.T, h *harness, joinURL string) joinPage {
	t.Helper()
	resp, err := (&http.Client{Transport: h.local}).Get(joinURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := joinPage{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if m := formAction.FindStringSubmatch(p.body); m != nil {
		p.action = m[1]
	}
	if m := assertionInput.FindStringSubmatch(p.body); m != nil {
		p.assertion = m[1]
	}
	return p
}

// postJoin posts the page's form to the Company as the browser does, and
// returns the answer without following the redirect.
func postJoin(t *testing.T, h *harness, p joinPage) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.action, strings.NewReader(url.Values{"assertion": {p.assertion}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := *h.company.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// ordersPage GETs the Company's /orders with the cookie.
func ordersPage(t *testing.T, h *harness, ck *http.Cookie) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/orders", nil)
	req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	resp, err := h.company.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestOpenWebsite(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, nil)
			cs := h.connect(t, rev)
			res, got := call(t, cs, "open_website", map[string]any{"domain": "example.com", "url": "/orders"})
			joinURL, _ := got["join_url"].(string)
			if res.IsError || got["joins_session"] != true || got["url"] != "https://example.com/orders" ||
				!strings.HasPrefix(joinURL, h.pages.BaseURL()+"/p/") || !strings.HasPrefix(joinURL, "http://127.0.0.1:") {
				t.Fatalf("open_website = %v (isError %v)", got, res.IsError)
			}
			if exp, err := time.Parse(time.RFC3339, got["expires_at"].(string)); err != nil || time.Until(exp) > time.Minute {
				t.Errorf("expires_at %v: not within a minute", got["expires_at"])
			}
			text := res.Content[0].(*sdk.TextContent).Text
			if !strings.Contains(text, "never the user's") {
				t.Errorf("the text does not say the link is not for the user's browser: %q", text)
			}
			p := openJoin(t, h, joinURL)
			checkJoinPage(t, p)
			resp := postJoin(t, h, p)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "https://example.com/orders" || len(resp.Cookies()) != 1 {
				t.Fatalf("the Company answered %d, Location %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
			}
			page := ordersPage(t, h, resp.Cookies()[0])
			if !strings.Contains(page, `data-signed-in="false"`) || !strings.Contains(page, got["session_id"].(string)) {
				t.Errorf("the website does not show the signed-out Session %v:\n%s", got["session_id"], page)
			}
			if again := openJoin(t, h, joinURL); again.status != http.StatusGone || again.assertion != "" {
				t.Errorf("second use of the join_url: %d", again.status)
			}
			if n := h.company.Served("browser_session"); n != 1 {
				t.Errorf("the Company joined %d browsers, want 1", n)
			}
			scanForSecrets(t, h, res)
		})
	}
}

// checkJoinPage checks the page's headers and form (Poppy 0.1 §5 step 2).
func checkJoinPage(t *testing.T, p joinPage) {
	t.Helper()
	if p.status != http.StatusOK || p.header.Get("Cache-Control") != "no-store" || p.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("join page: %d, Cache-Control %q, Referrer-Policy %q", p.status, p.header.Get("Cache-Control"), p.header.Get("Referrer-Policy"))
	}
	if p.action != "https://example.com/poppy/browser-session" || strings.Count(p.assertion, ".") != 2 {
		t.Fatalf("join form posts %q with assertion %q", p.action, p.assertion)
	}
	csp := p.header.Get("Content-Security-Policy")
	m := scriptNonce.FindStringSubmatch(p.body)
	if m == nil || !strings.Contains(csp, "script-src 'nonce-"+m[1]+"'") || strings.Contains(csp, "unsafe-inline") ||
		!strings.Contains(csp, "form-action https://example.com ") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q does not allow just this page's script and its form post", csp)
	}
}

// TestOpenWebsiteSignsWhenOpened: the assertion is made when the page is
// opened, for the Session as it is then, not when the tool was called.
func TestOpenWebsiteSignsWhenOpened(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[1])
	_, got := call(t, cs, "open_website", map[string]any{"domain": "example.com"})
	if got["url"] != "https://example.com/" {
		t.Errorf("default url = %v", got["url"])
	}
	_, fresh := call(t, cs, "start_session", map[string]any{"domain": "example.com", "new": true})
	resp := postJoin(t, h, openJoin(t, h, got["join_url"].(string)))
	page := ordersPage(t, h, resp.Cookies()[0])
	if !strings.Contains(page, fresh["session_id"].(string)) {
		t.Errorf("the page joined an old Session, not %v:\n%s", fresh["session_id"], page)
	}
}

// TestOpenWebsiteRefusesForeignURL: url must be on the Company's domain,
// refused before any page opens or anything is signed.
func TestOpenWebsiteRefusesForeignURL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[0])
	for _, u := range []string{"https://evil.example/orders", "http://example.com/orders", "https://notexample.com/",
		"https://dana@example.com/", "//evil.example/", "javascript:alert(1)"} {
		res, got := call(t, cs, "open_website", map[string]any{"domain": "example.com", "url": u})
		if !res.IsError || got["error"] != "invalid_url" || got["join_url"] != nil {
			t.Errorf("url %q: %v (isError %v)", u, got, res.IsError)
		}
	}
	if n := len(h.company.Sessions()); n != 0 {
		t.Errorf("a refused url started %d Sessions", n)
	}
	_, got := call(t, cs, "open_website", map[string]any{"domain": "example.com", "url": "https://www.example.com/orders#top"})
	if got["url"] != "https://www.example.com/orders" {
		t.Errorf("a subdomain page: %v", got)
	}
}

// TestOpenWebsiteExpired: a join_url opened after a minute signs nothing.
func TestOpenWebsiteExpired(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	h := newHarnessWith(t, nil, &harnessOptions{Now: clock.now})
	cs := h.connect(t, revisions[0])
	_, got := call(t, cs, "open_website", map[string]any{"domain": "example.com"})
	clock.advance(61 * time.Second)
	p := openJoin(t, h, got["join_url"].(string))
	if p.status != http.StatusGone || p.assertion != "" || p.header.Get("Cache-Control") != "no-store" {
		t.Errorf("expired join_url: %d, assertion %q", p.status, p.assertion)
	}
}

// TestOpenWebsiteWithoutEndpoint: the website is browsed signed out.
func TestOpenWebsiteWithoutEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) { delete(doc, "web") }})
	cs := h.connect(t, revisions[1])
	res, got := call(t, cs, "open_website", map[string]any{"domain": "example.com", "url": "/orders"})
	text := res.Content[0].(*sdk.TextContent).Text
	if res.IsError || got["joins_session"] != false || got["join_url"] != nil || !strings.Contains(text, "signed-out visitor") {
		t.Errorf("without the endpoint: %v %q", got, text)
	}
}
