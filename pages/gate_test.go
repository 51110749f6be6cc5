package pages

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

const testCredential = "the-deployment-token"

// newPublic is a Server under https://agent.example/pages behind a
// CredentialGate for testCredential.
func newPublic(t *testing.T) *Server {
	t.Helper()
	s, err := New(&Options{PublicURL: "https://agent.example/pages", Gate: NewCredentialGate(testCredential)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// visit sends one request to the public handler as a browser at
// agent.example would, with cookies and a form.
func visit(s *Server, method, u string, form url.Values, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://agent.example")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

func okPage(w http.ResponseWriter, r *http.Request, done func()) { io.WriteString(w, "the page") }

// TestGateAsksForTheCredential: a public page opened without the cookie asks
// for the deployment's credential and shows nothing of the page; a wrong
// credential is refused; the right one sets a cookie (not the credential)
// with the flags that keep it to this origin, and the page then opens.
func TestGateAsksForTheCredential(t *testing.T) {
	s := newPublic(t)
	u, _ := s.OpenForUser("", okPage, 0)
	rec := visit(s, http.MethodGet, u, nil)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `name="poppy_credential"`) || strings.Contains(rec.Body.String(), "the page") {
		t.Fatalf("without the cookie: %d %s", rec.Code, rec.Body)
	}
	if rec := visit(s, http.MethodPost, u, url.Values{"poppy_credential": {"guess"}}); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("a wrong credential: %d %v", rec.Code, rec.Result().Cookies())
	}
	rec = visit(s, http.MethodPost, u, url.Values{"poppy_credential": {testCredential}})
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("the right credential: %d %v", rec.Code, cookies)
	}
	if loc := rec.Header().Get("Location"); loc != "./"+u[strings.LastIndex(u, "/")+1:] {
		t.Errorf("Location %q does not send the browser back to the page", loc)
	}
	c := cookies[0]
	if c.Name != "__Host-poppy-pages" || !c.Secure || !c.HttpOnly || c.Path != "/" || c.Domain != "" || c.SameSite != http.SameSiteLaxMode {
		t.Errorf("cookie %+v: want __Host-, Secure, HttpOnly, Path=/, no Domain, SameSite=Lax", c)
	}
	if strings.Contains(c.Value, testCredential) {
		t.Error("the cookie holds the credential")
	}
	if rec := visit(s, http.MethodGet, u, nil, c); rec.Code != 200 || rec.Body.String() != "the page" {
		t.Errorf("with the cookie: %d %s", rec.Code, rec.Body)
	}
	forged := &http.Cookie{Name: c.Name, Value: strings.Repeat("A", len(c.Value))}
	if rec := visit(s, http.MethodGet, u, nil, forged); rec.Code != http.StatusUnauthorized {
		t.Errorf("a forged cookie: %d", rec.Code)
	}
	other := newPublic(t) // another process: another key
	u2, _ := other.OpenForUser("", okPage, 0)
	if rec := visit(other, http.MethodGet, u2, nil, c); rec.Code != http.StatusUnauthorized {
		t.Errorf("a cookie of another process: %d", rec.Code)
	}
}

// TestGateRefusesCrossSiteCredential: the credential form cannot be posted
// from another site (login CSRF).
func TestGateRefusesCrossSiteCredential(t *testing.T) {
	s := newPublic(t)
	u, _ := s.OpenForUser("", okPage, 0)
	req := httptest.NewRequest(http.MethodPost, u, strings.NewReader("poppy_credential="+testCredential))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Errorf("a cross-site credential post: %d %v", rec.Code, rec.Result().Cookies())
	}
}

// TestPublicPageForeignHost: a public page answers only for the public host,
// so a DNS-rebinding page cannot reach it.
func TestPublicPageForeignHost(t *testing.T) {
	s := newPublic(t)
	u, _ := s.OpenForUser("", okPage, 0)
	for host, want := range map[string]int{"agent.example": 401, "AGENT.example:443": 401, "attacker.example": 421, "agent.example:8443": 421, "127.0.0.1:8808": 421} {
		req := httptest.NewRequest(http.MethodGet, u, nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

// TestPagesStayOnTheirSurface: a page for the agent's own browser (Open) is
// served on loopback only, never under PublicURL, whatever the caller
// knows; a page for the user under PublicURL is not on loopback.
func TestPagesStayOnTheirSurface(t *testing.T) {
	s := newPublic(t)
	local, _ := s.Open(okPage, 0)
	if !strings.HasPrefix(local, s.LoopbackURL()+"/p/") || !strings.HasPrefix(local, "http://127.0.0.1:") {
		t.Fatalf("Open gave %q, not a loopback URL", local)
	}
	token := local[strings.LastIndex(local, "/")+1:]
	g := s.gate.(*CredentialGate)
	admitted := &http.Cookie{Name: GateCookie, Value: encode(g.want)}
	if rec := visit(s, http.MethodGet, "https://agent.example/pages/p/"+token, nil, admitted); rec.Code != http.StatusGone {
		t.Errorf("a loopback page under the public URL: %d %s", rec.Code, rec.Body)
	}
	if resp, body := get(t, local); resp.StatusCode != 200 || body != "the page" {
		t.Errorf("the loopback page on loopback: %d %s", resp.StatusCode, body)
	}
	public, _ := s.OpenForUser("", okPage, 0)
	if resp, _ := get(t, s.LoopbackURL()+"/p/"+public[strings.LastIndex(public, "/")+1:]); resp.StatusCode != http.StatusGone {
		t.Errorf("a public page on loopback: %d", resp.StatusCode)
	}
}

// TestPagesListenOnLoopbackOnly: the pages' listener never binds off loopback.
func TestPagesListenOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		if s, err := New(&Options{Addr: addr}); err == nil {
			s.Close()
			t.Errorf("Addr %q was accepted", addr)
		}
	}
}

// TestPublicPageWithoutGate: a Server with a PublicURL and no Gate opens
// its public pages to no one.
func TestPublicPageWithoutGate(t *testing.T) {
	s, err := New(&Options{PublicURL: "https://agent.example/pages"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	u, _ := s.OpenForUser("", okPage, 0)
	if rec := visit(s, http.MethodGet, u, nil); rec.Code != http.StatusForbidden {
		t.Errorf("no gate: %d", rec.Code)
	}
}

func encode(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// ownerGate admits a browser whose "who" cookie names the page's owner.
type ownerGate struct{}

func (ownerGate) Admit(w http.ResponseWriter, r *http.Request, owner string) bool {
	if c, err := r.Cookie("who"); err == nil && owner != "" && c.Value == owner {
		return true
	}
	http.Error(w, "not yours", http.StatusForbidden)
	return false
}

// TestGateSeesThePagesOwner: the Gate is told whom each page was opened
// for, so a deployment serving several people admits to a page only its
// owner's browser. The old Gate saw only the request: any admitted browser
// opened every page.
func TestGateSeesThePagesOwner(t *testing.T) {
	s, err := New(&Options{PublicURL: "https://agent.example/pages", Gate: ownerGate{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	alices, _ := s.OpenForUser("alice", okPage, 0)
	for who, want := range map[string]int{"alice": 200, "bob": 403, "": 403} {
		if rec := visit(s, http.MethodGet, alices, nil, &http.Cookie{Name: "who", Value: who}); rec.Code != want {
			t.Errorf("%q opening alice's page: %d, want %d", who, rec.Code, want)
		}
	}
	nobodys, _ := s.OpenForUser("", okPage, 0)
	if rec := visit(s, http.MethodGet, nobodys, nil, &http.Cookie{Name: "who", Value: ""}); rec.Code != 403 {
		t.Errorf("a page opened for nobody: %d", rec.Code)
	}
}
