package poppytest_test

// Tests of the browser-session endpoint and the website (Poppy 0.1 §5),
// driven by the raw agent: browser assertions signed by hand with go-jose,
// posted the way a browser posts a form.

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const (
	testBrowserURL = "https://example.com/poppy/browser-session"
	testOrdersURL  = "https://example.com/orders"
)

// browserAssertion is a §5 browser assertion for Session sid, edited by mut.
func (a *rawAgent) browserAssertion(sid string, mut func(map[string]any)) string {
	now := a.now().Unix()
	c := map[string]any{"iss": testClientID, "sub": a.userID, "aud": testBrowserURL, "session_id": sid,
		"return_to": testOrdersURL, "iat": now, "exp": now + 60, "jti": jti()}
	if mut != nil {
		mut(c)
	}
	return a.sign(a.signKey, map[jose.HeaderKey]any{"kid": "k1", "typ": "poppy-browser+jwt"}, false, c)
}

// postBrowser posts assertion to the endpoint as a browser's form
// navigation would, without following the redirect.
func postBrowser(t *testing.T, s *poppytest.Server, assertion string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, testBrowserURL, strings.NewReader(url.Values{"assertion": {assertion}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	return noRedirect(t, s, req)
}

// joinCookie posts assertion, wants the 303 to return_to, and returns the cookie.
func joinCookie(t *testing.T, s *poppytest.Server, assertion, returnTo string) *http.Cookie {
	t.Helper()
	resp, body := postBrowser(t, s, assertion)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != returnTo {
		t.Fatalf("join: %d Location %q, want 303 to %s; %s", resp.StatusCode, resp.Header.Get("Location"), returnTo, body)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != poppytest.WebCookie {
		t.Fatalf("join set cookies %v, want one %s", cookies, poppytest.WebCookie)
	}
	return cookies[0]
}

// sitePage GETs u with the cookie (nil for none) and returns the page.
func sitePage(t *testing.T, s *poppytest.Server, u string, ck *http.Cookie) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if ck != nil {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	resp, body := noRedirect(t, s, req)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET %s: %d, Cache-Control %q", u, resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	return body
}

func signedIn(page string) bool { return strings.Contains(page, `data-signed-in="true"`) }

func TestBrowserSessionJoin(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	sid := a.startSession().str("session_id")
	if got := s.BrowserSessionEndpoint(); got != testBrowserURL {
		t.Fatalf("BrowserSessionEndpoint = %q", got)
	}
	resp, _ := postBrowser(t, s, a.browserAssertion(sid, nil))
	ck := resp.Cookies()[0]
	// Poppy 0.1 §5: "MUST be Secure and HttpOnly, and use SameSite=Lax or None, not Strict."
	if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "example.com" {
		t.Errorf("cookie %+v: want Secure, HttpOnly, SameSite=Lax, Path=/, Domain=example.com", ck)
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != testOrdersURL || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("answer %d, Location %q, Cache-Control %q", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Cache-Control"))
	}
	page := sitePage(t, s, testOrdersURL, ck)
	if signedIn(page) || !strings.Contains(page, sid) || strings.Contains(page, "ord_1042") {
		t.Fatalf("signed-out Session's orders page:\n%s", page)
	}
	// Poppy 0.1 §5: the cookie "MUST follow the Session's current state".
	if err := s.SignInSession(sid, "acct_dana", "poppy:read"); err != nil {
		t.Fatal(err)
	}
	page = sitePage(t, s, "https://www.example.com/orders", ck)
	if !signedIn(page) || !strings.Contains(page, "dana@example.com") || !strings.Contains(page, "ord_1042") || strings.Contains(page, "ord_2001") {
		t.Fatalf("signed-in Session's orders page:\n%s", page)
	}
	if n := s.RevokeAccountTokens("acct_dana"); n != 1 {
		t.Fatalf("RevokeAccountTokens = %d", n)
	}
	if page = sitePage(t, s, testOrdersURL, ck); signedIn(page) || strings.Contains(page, "ord_1042") {
		t.Fatalf("after sign-out:\n%s", page)
	}
	if page = sitePage(t, s, testOrdersURL, nil); signedIn(page) || strings.Contains(page, `data-session="ses_`) {
		t.Errorf("a visitor without the cookie:\n%s", page)
	}
	if n := s.Served("browser_session"); n != 1 {
		t.Errorf("Served(browser_session) = %d", n)
	}
	wantNoViolation(t, s, rt)
}

// TestBrowserSessionScopes: the website applies the Session's scopes.
func TestBrowserSessionScopes(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	sid := a.startSession().str("session_id")
	if err := s.SignInSession(sid, "acct_sam", "poppy:write"); err != nil {
		t.Fatal(err)
	}
	ck := joinCookie(t, s, a.browserAssertion(sid, func(c map[string]any) { c["return_to"] = "https://www.example.com/" }), "https://www.example.com/")
	if page := sitePage(t, s, testOrdersURL, ck); !signedIn(page) || strings.Contains(page, "ord_2001") || !strings.Contains(page, "poppy:read") {
		t.Errorf("a Session without poppy:read:\n%s", page)
	}
	if err := s.SignInSession("ses_none", "acct_sam"); err == nil {
		t.Error("SignInSession of an unknown Session succeeded")
	}
	wantNoViolation(t, s, rt)
}

// TestBrowserSessionEnded: the cookie does not outlive the Session, and an
// ended Session cannot be joined.
func TestBrowserSessionEnded(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	sid := a.startSession().str("session_id")
	_ = s.SignInSession(sid, "acct_dana", "poppy:read")
	ck := joinCookie(t, s, a.browserAssertion(sid, nil), testOrdersURL)
	s.EndSession(sid)
	if page := sitePage(t, s, testOrdersURL, ck); signedIn(page) || strings.Contains(page, sid) {
		t.Errorf("the cookie outlived its Session:\n%s", page)
	}
	wantRefused(t, s, a.browserAssertion(sid, nil))
	wantNoViolation(t, s, rt)
}

// TestBrowserSessionReplacesCookie: each assertion sets a new cookie.
func TestBrowserSessionReplacesCookie(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	first := a.startSession().str("session_id")
	second := a.startSession().str("session_id")
	ck1 := joinCookie(t, s, a.browserAssertion(first, nil), testOrdersURL)
	ck2 := joinCookie(t, s, a.browserAssertion(second, nil), testOrdersURL)
	if ck1.Value == ck2.Value || !strings.Contains(sitePage(t, s, testOrdersURL, ck2), second) {
		t.Errorf("the second join did not give a cookie for Session %s", second)
	}
	wantNoViolation(t, s, rt)
}

// wantRefused posts assertion and wants the 400 page without a cookie.
func wantRefused(t *testing.T, s *poppytest.Server, assertion string) {
	t.Helper()
	resp, body := postBrowser(t, s, assertion)
	if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 || !strings.Contains(body, `id="error"`) {
		t.Errorf("refusal: %d, cookies %v, want 400 without a cookie; %s", resp.StatusCode, resp.Cookies(), body)
	}
}

// TestBrowserSessionChecks runs each check of Poppy 0.1 §5 step 3.
func TestBrowserSessionChecks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mut       func(c map[string]any)
		violation string // "" for a normal event
	}{
		{"wrong aud", func(c map[string]any) { c["aud"] = testTokenURL }, "aud"},
		{"aud array", func(c map[string]any) { c["aud"] = []string{testBrowserURL} }, "aud"},
		{"expired", func(c map[string]any) { c["iat"], c["exp"] = c["iat"].(int64)-90, c["iat"].(int64)-30 }, ""},
		{"lives 61 s", func(c map[string]any) { c["exp"] = c["iat"].(int64) + 61 }, "more than 1m0s"},
		{"no iat", func(c map[string]any) { delete(c, "iat") }, "no iat"},
		{"short jti", func(c map[string]any) { c["jti"] = "abc" }, "128 bits"},
		{"no sub", func(c map[string]any) { c["sub"] = "" }, "sub"},
		{"other User", func(c map[string]any) { c["sub"] = "usr_other" }, "another client_id or User"},
		{"unknown Session", func(c map[string]any) { c["session_id"] = "ses_unknown" }, "names no Session"},
		{"foreign return_to", func(c map[string]any) { c["return_to"] = "https://evil.example/orders" }, "return_to"},
		{"look-alike return_to", func(c map[string]any) { c["return_to"] = "https://notexample.com/" }, "return_to"},
		{"http return_to", func(c map[string]any) { c["return_to"] = "http://example.com/orders" }, "return_to"},
		{"userinfo return_to", func(c map[string]any) { c["return_to"] = "https://evil@example.com/" }, "return_to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newTestCompany(t, nil)
			sid := a.startSession().str("session_id")
			wantRefused(t, s, a.browserAssertion(sid, tc.mut))
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§5", tc.violation)
			}
		})
	}
}

// TestBrowserSessionSignature: only a browser assertion signed with the
// agent's published key is accepted.
func TestBrowserSessionSignature(t *testing.T) {
	t.Run("session assertion", func(t *testing.T) {
		s, rt, a, _ := newTestCompany(t, nil)
		sid := a.startSession().str("session_id")
		// Poppy 0.1 §5: "A Session assertion isn't accepted here"
		wantRefused(t, s, a.sessionAssertion("JWT", func(c map[string]any) {
			c["aud"], c["session_id"], c["return_to"] = testBrowserURL, sid, testOrdersURL
		}))
		wantViolation(t, s, rt, "§5", "typ")
	})
	t.Run("unpublished key", func(t *testing.T) {
		s, rt, a, _ := newTestCompany(t, nil)
		sid := a.startSession().str("session_id")
		other := *a
		other.signKey = newKey(t)
		wantRefused(t, s, other.browserAssertion(sid, nil))
		wantViolation(t, s, rt, "§5", "verifies")
	})
	t.Run("other client", func(t *testing.T) {
		s, rt, a, _ := newTestCompany(t, nil)
		sid := a.startSession().str("session_id")
		a.publishOther()
		wantRefused(t, s, a.browserAssertion(sid, func(c map[string]any) { c["iss"] = otherClientID }))
		wantViolation(t, s, rt, "§5", "another client_id or User")
	})
	t.Run("not a JWT", func(t *testing.T) {
		s, rt, _, _ := newTestCompany(t, nil)
		wantRefused(t, s, "not-a-jwt")
		wantViolation(t, s, rt, "§5", "not a JWT")
	})
}

// TestBrowserSessionReplay: a jti is accepted once.
func TestBrowserSessionReplay(t *testing.T) {
	s, rt, a, c := newTestCompany(t, nil)
	sid := a.startSession().str("session_id")
	as := a.browserAssertion(sid, nil)
	joinCookie(t, s, as, testOrdersURL)
	c.Advance(10 * time.Second)
	wantRefused(t, s, as)
	wantViolation(t, s, rt, "§5", "accepted before")
}

// TestBrowserSessionPost: the assertion comes in a form POST body, as a
// top-level navigation.
func TestBrowserSessionPost(t *testing.T) {
	post := func(t *testing.T, s *poppytest.Server, u, contentType, body string, h http.Header) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, _ := noRedirect(t, s, req)
		return resp
	}
	t.Run("json body", func(t *testing.T) {
		s, rt, a, _ := newTestCompany(t, nil)
		sid := a.startSession().str("session_id")
		resp := post(t, s, testBrowserURL, "application/json", `{"assertion":"`+a.browserAssertion(sid, nil)+`"}`, nil)
		if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
			t.Errorf("JSON body: %d", resp.StatusCode)
		}
		wantViolation(t, s, rt, "§5", "Content-Type")
	})
	t.Run("fetch, not navigation", func(t *testing.T) {
		s, rt, a, _ := newTestCompany(t, nil)
		sid := a.startSession().str("session_id")
		body := url.Values{"assertion": {a.browserAssertion(sid, nil)}}.Encode()
		resp := post(t, s, testBrowserURL, "application/x-www-form-urlencoded", body, http.Header{"Sec-Fetch-Mode": {"cors"}, "Sec-Fetch-Dest": {"empty"}})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a fetch: %d", resp.StatusCode)
		}
		wantViolation(t, s, rt, "§5", "top-level navigation")
	})
	t.Run("assertion in the URL", func(t *testing.T) {
		s, rt, a, _ := newTestCompany(t, nil)
		sid := a.startSession().str("session_id")
		resp := post(t, s, testBrowserURL+"?assertion="+a.browserAssertion(sid, nil), "application/x-www-form-urlencoded", "", nil)
		if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
			t.Errorf("assertion in the URL: %d", resp.StatusCode)
		}
		if v := s.Violations(); len(v) != 2 || !strings.Contains(v[1], "§5: the browser assertion is in the URL") || len(rt.Errors()) != 2 {
			t.Errorf("violations %q, want the URL check (§4.3) and §5's", v)
		}
	})
	t.Run("GET", func(t *testing.T) {
		s, rt, _, _ := newTestCompany(t, nil)
		resp, _ := getPage(t, s, testBrowserURL)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || len(resp.Cookies()) != 0 {
			t.Errorf("GET: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
		wantNoViolation(t, s, rt)
	})
}

// FuzzBrowserSession posts arbitrary bodies to the endpoint: the Server
// never panics, and never sets a cookie for an assertion it did not verify.
func FuzzBrowserSession(f *testing.F) {
	f.Add("assertion=eyJhbGciOiJFUzI1NiJ9.e30.AAAA")
	f.Add("assertion=a&assertion=b")
	f.Add("assertion=%zz")
	f.Add("assertion=" + strings.Repeat("A", 20000))
	f.Add("assertion=eyJ0eXAiOiJwb3BweS1icm93c2VyK2p3dCIsImFsZyI6IkVTMjU2In0.eyJpc3MiOiJodHRwczovL2FnZW50LmV4YW1wbGUvYWdlbnQuanNvbiJ9.AA")
	rt := newRecordingT()
	f.Cleanup(rt.Close)
	s := poppytest.NewServer(rt, nil)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, testBrowserURL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || len(w.Result().Cookies()) != 0 {
			t.Fatalf("body %q: %d, cookies %v", body, w.Code, w.Result().Cookies())
		}
	})
}
