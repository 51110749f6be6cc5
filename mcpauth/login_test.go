package mcpauth_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// pagesClient is poppy-mcp's client at the issuer for browser sign-in.
const pagesClient = "poppy-pages"

// withPages serves pages under https://agent.test/pages behind a Login
// (the client pagesClient, with secret when not ""), and its callback.
func (d *deployment) withPages(t *testing.T, secret string) (*pages.Server, *mcpauth.Login) {
	t.Helper()
	d.idp.AddClient(oidctest.Client{ID: pagesClient, Secret: secret, RedirectURIs: []string{"https://agent.test" + mcpauth.CallbackPath}})
	login, err := d.res.NewLogin("https://agent.test", &mcpauth.LoginOptions{ClientID: pagesClient, ClientSecret: secret,
		HTTPClient: &http.Client{Transport: d.idp.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pages.New(&pages.Options{PublicURL: "https://agent.test/pages", Gate: login})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d.mux.Handle("/pages/", p.Handler())
	d.mux.Handle("GET "+mcpauth.CallbackPath, p.CheckHost(login.CallbackHandler()))
	return p, login
}

// browser is a person's browser: signed in at the issuer as person, with
// cookies, reaching the deployment and the issuer by their names.
func (d *deployment) browser(person string) *http.Client {
	jar, _ := cookiejar.New(nil)
	d.idp.SignIn(jar, person)
	agent, idp := d.transport(), d.idp.Transport()
	return &http.Client{Jar: jar, Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Host == d.idp.Host() {
			return idp.RoundTrip(r)
		}
		return agent.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// open GETs u in browser b, following redirects, and returns the last
// status and body.
func open(t *testing.T, b *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func thePage(w http.ResponseWriter, r *http.Request, done func()) { io.WriteString(w, "the page") }

// TestPagesTieToThePerson: a page opened for alice sends a browser that is
// signed in as nobody to sign in with the issuer (OIDC, code with PKCE),
// then opens only for alice: bob, signed in as bob, is refused. Alice's
// browser keeps a cookie for this origin only and opens her next page
// without signing in again. A callback replayed in another browser signs
// no one in, and neither the subject nor any token is logged.
func TestPagesTieToThePerson(t *testing.T) {
	for _, secret := range []string{"", "pages-client-secret"} {
		d := newDeployment(t, nil)
		p, _ := d.withPages(t, secret)
		aliceKey := (mcpauth.User{Issuer: d.idp.Issuer(), Subject: "alice"}).Key()
		page, _ := p.OpenForUser(aliceKey, thePage, 0)
		bob := d.browser("bob")
		if code, body := open(t, bob, page); code != http.StatusForbidden || strings.Contains(body, "the page") {
			t.Fatalf("bob opening alice's page: %d %s", code, body)
		}
		alice := d.browser("alice")
		if code, body := open(t, alice, page); code != 200 || body != "the page" {
			t.Fatalf("alice opening her page: %d %s", code, body)
		}
		person := cookieNamed(alice, mcpauth.SessionCookie)
		if person == nil || strings.Contains(person.Value, "alice") {
			t.Fatalf("alice's session cookie: %+v", person)
		}
		signIns := d.idp.Served("/authorize")
		second, _ := p.OpenForUser(aliceKey, thePage, 0)
		if code, _ := open(t, alice, second); code != 200 || d.idp.Served("/authorize") != signIns {
			t.Errorf("alice's second page: %d, %d more sign-ins", code, d.idp.Served("/authorize")-signIns)
		}
		if strings.Contains(d.logs.String(), "alice") || strings.Contains(d.logs.String(), person.Value) {
			t.Errorf("the log has the subject or the cookie:\n%s", d.logs.String())
		}
	}
}

// cookieNamed is the browser's cookie name for the deployment.
func cookieNamed(b *http.Client, name string) *http.Cookie {
	for _, c := range b.Jar.Cookies(&url.URL{Scheme: "https", Host: "agent.test", Path: "/"}) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestSessionCookieFlags: the session cookie is __Host- (Secure, Path=/,
// no Domain), HttpOnly and SameSite=Lax; a tampered one, or one sealed by
// another deployment's secret, is no one's.
func TestSessionCookieFlags(t *testing.T) {
	d := newDeployment(t, nil)
	p, login := d.withPages(t, "")
	page, _ := p.OpenForUser((mcpauth.User{Issuer: d.idp.Issuer(), Subject: "alice"}).Key(), thePage, 0)
	b := d.browser("alice")
	b.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if r.URL.String() == page {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := b.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var set *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == mcpauth.SessionCookie {
			set = c
		}
	}
	if set == nil || !set.Secure || !set.HttpOnly || set.Path != "/" || set.Domain != "" || set.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the session cookie: %+v (status %d)", set, resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://agent.test/pages/p/x", nil)
	req.AddCookie(set)
	if u, ok := login.Person(req); !ok || u.Subject != "alice" {
		t.Fatalf("Person = %v %v", u, ok)
	}
	for _, v := range []string{set.Value[:len(set.Value)-2] + "AA", "", strings.Repeat("A", 80)} {
		req, _ := http.NewRequest(http.MethodGet, "https://agent.test/", nil)
		req.AddCookie(&http.Cookie{Name: mcpauth.SessionCookie, Value: v})
		if _, ok := login.Person(req); ok {
			t.Errorf("a tampered cookie %q is someone's", v)
		}
	}
	other := newDeployment(t, nil)
	_, otherLogin := other.withPages(t, "")
	if _, ok := otherLogin.Person(req); ok {
		t.Error("another deployment's cookie is someone's here")
	}
}

// TestCallbackReplayedElsewhere: the issuer's redirect back, carried to
// another browser (a login CSRF: an attacker's code pushed on the user),
// signs that browser in as no one.
func TestCallbackReplayedElsewhere(t *testing.T) {
	d := newDeployment(t, nil)
	p, _ := d.withPages(t, "")
	page, _ := p.OpenForUser((mcpauth.User{Issuer: d.idp.Issuer(), Subject: "mallory"}).Key(), thePage, 0)
	mallory := d.browser("mallory")
	var callback string
	mallory.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if r.URL.Path == mcpauth.CallbackPath {
			callback = r.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	open(t, mallory, page)
	if callback == "" {
		t.Fatal("the sign-in never came back")
	}
	victim := d.browser("alice")
	if code, _ := open(t, victim, callback); code != http.StatusBadRequest || cookieNamed(victim, mcpauth.SessionCookie) != nil {
		t.Errorf("the replayed callback: %d, signed in: %v", code, cookieNamed(victim, mcpauth.SessionCookie) != nil)
	}
}
