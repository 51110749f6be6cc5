package auth

import (
	"crypto/ecdsa"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestReturnTo: the page a join lands on is an https URL on the Company's
// organization.domain or a subdomain (Poppy 0.1 §5), a path on the domain,
// or the home page; its fragment is dropped. A port in organization.domain
// does not keep its own host from matching.
func TestReturnTo(t *testing.T) {
	for _, tc := range []struct{ domain, page, want string }{
		{"example.com", "", "https://example.com/"},
		{"example.com", "/orders?id=1#top", "https://example.com/orders?id=1"},
		{"Example.COM", "https://www.example.com/a", "https://www.example.com/a"},
		{"localhost:8443", "/orders", "https://localhost/orders"},
		{"localhost:8443", "https://localhost:8443/orders", "https://localhost:8443/orders"},
	} {
		if got, err := ReturnTo(tc.domain, tc.page); err != nil || got != tc.want {
			t.Errorf("ReturnTo(%q, %q) = %q, %v; want %q", tc.domain, tc.page, got, err, tc.want)
		}
	}
	for _, page := range []string{"https://evil.example/orders", "http://example.com/orders", "https://notexample.com/",
		"https://dana@example.com/", "//evil.example/", "javascript:alert(1)", "https://example.com.evil.example/"} {
		if got, err := ReturnTo("example.com", page); err == nil || !strings.HasPrefix(err.Error(), "auth: ") {
			t.Errorf("ReturnTo(example.com, %q) = %q, %v", page, got, err)
		}
	}
}

// TestWriteJoinPage: the page posts a browser assertion signed for the
// Session and the page to its endpoint, in a form that submits itself with
// a script the CSP allows alone, and is not stored. A page off the domain
// gets nothing written and an error.
func TestWriteJoinPage(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	d := co.srv.Domain()
	co.c.BrowserSessionEndpoint = co.srv.URL(d, "/poppy/browser-session")
	s := co.start(t)
	site, err := s.At(co.c)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	if err := site.WriteJoinPage(rec, "https://www."+d+"/orders"); err != nil {
		t.Fatal(err)
	}
	body := rec.Body.String()
	action := regexp.MustCompile(`<form id="join" method="post" action="([^"]+)"`).FindStringSubmatch(body)
	value := regexp.MustCompile(`name="assertion" value="([^"]+)"`).FindStringSubmatch(body)
	nonce := regexp.MustCompile(`<script nonce="([^"]+)">`).FindStringSubmatch(body)
	if action == nil || action[1] != co.c.BrowserSessionEndpoint || value == nil || nonce == nil {
		t.Fatalf("page:\n%s", body)
	}
	_, c := verifyJWS(t, value[1], co.agent.Identity().JWKS().Keys[0].Key.(*ecdsa.PublicKey))
	if c["session_id"] != s.Info().ID || c["return_to"] != "https://www."+d+"/orders" {
		t.Errorf("claims %v", c)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'nonce-"+nonce[1]+"'") || !strings.Contains(csp, "form-action "+webOrigin(co.c.BrowserSessionEndpoint)) ||
		rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", rec.Header())
	}
	rec = httptest.NewRecorder()
	if err := site.WriteJoinPage(rec, "https://evil.example/"); err == nil || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Errorf("off the domain: %v, wrote %q %v", err, rec.Body.String(), rec.Header())
	}
	// An organization.domain with a port (a Company under development)
	// still owns its host's pages; the old check compared the host with
	// "example.com:8443" and refused them all.
	withPort := co.c
	withPort.Domain += ":8443"
	if site, err = s.At(withPort); err != nil {
		t.Fatal(err)
	}
	if _, err := site.BrowserAssertion("https://www." + d + "/orders"); err != nil {
		t.Errorf("organization.domain with a port: %v", err)
	}
}
