// This file implements joining the agent's browser to a Session on a
// Company's website (Poppy 0.1 §5): the return_to rule, the browser
// assertion a Session signs for one page, and the page that makes the
// browser post it. Where the page is served is the caller's concern; the
// assertion never leaves it.

package auth

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ReturnTo resolves page to a return_to for the Company whose
// organization.domain is domain: page is an https URL on the domain or one
// of its subdomains, a path on the domain, or "" for its home page. The
// fragment is dropped: it is the browser's, not the Company's.
func ReturnTo(domain, page string) (string, error) {
	host := domainHost(domain)
	switch {
	case page == "":
		page = "https://" + host + "/"
	case strings.HasPrefix(page, "/") && !strings.HasPrefix(page, "//"):
		page = "https://" + host + page
	}
	u, err := url.Parse(page)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("auth: page %q is not an https URL", page)
	}
	if err := onDomain(u, domain); err != nil {
		return "", err
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// onDomain applies the return_to rule to u.
func onDomain(u *url.URL, domain string) error {
	host, want := strings.ToLower(u.Hostname()), domainHost(domain)
	// Poppy 0.1 §5: return_to "MUST be an HTTPS URL on the Company's organization.domain or one of its subdomains."
	if want == "" || host != want && !strings.HasSuffix(host, "."+want) {
		return fmt.Errorf("auth: page %q is not on %s (Poppy 0.1 §5)", u.String(), want)
	}
	return nil
}

// domainHost is organization.domain lowercased, without a port.
func domainHost(domain string) string {
	host := strings.ToLower(domain)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host
}

// BrowserAssertion signs the assertion with which the agent's browser joins
// this Session on the website of the domain the Session was started through
// (Poppy 0.1 §5; Site.BrowserAssertion for another). returnTo is the page
// to open afterwards.
func (s *Session) BrowserAssertion(returnTo string) (Secret, error) {
	return s.site().BrowserAssertion(returnTo)
}

// BrowserAssertion signs the assertion with which the agent's browser joins
// the Session on this domain's website, posted to its
// web.browser_session_endpoint (Poppy 0.1 §5). returnTo is the page to open
// afterwards, on this domain.
func (w *Site) BrowserAssertion(returnTo string) (Secret, error) {
	s, c := w.s, w.c
	if c.BrowserSessionEndpoint == "" {
		return Secret{}, errors.New("auth: the Company offers no browser_session_endpoint")
	}
	u, err := httpsURL("return_to", returnTo)
	if err != nil {
		return Secret{}, err
	}
	if err := onDomain(u, c.Domain); err != nil {
		return Secret{}, err
	}
	return s.a.id.BrowserAssertion(s.userID, c.BrowserSessionEndpoint, s.Info().ID, returnTo)
}

// WriteJoinPage writes the page that joins the browser which loads it to
// the Session on this domain's website, then opens returnTo: a form that
// posts a browser assertion signed now, so it is fresh, to
// web.browser_session_endpoint and submits itself. Nothing is written when
// the assertion cannot be signed. The caller serves the page once, to a
// browser the agent controls (Poppy 0.1 §5: "MUST post browser assertions
// only from a browser it controls, never from the User's own browser"),
// with Cache-Control: no-store.
func (w *Site) WriteJoinPage(rw http.ResponseWriter, returnTo string) error {
	assertion, err := w.BrowserAssertion(returnTo)
	if err != nil {
		return err
	}
	f := joinForm{Endpoint: w.c.BrowserSessionEndpoint, ReturnTo: returnTo, Assertion: assertion.Reveal(), Nonce: cspNonce()}
	// The CSP allows only this page's own script, and form posts to the
	// endpoint and the Company's hosts, which the 303 to return_to is
	// checked against too.
	targets := []string{webOrigin(f.Endpoint)}
	if o := webOrigin(f.ReturnTo); o != targets[0] {
		targets = append(targets, o)
	}
	host := domainHost(w.c.Domain)
	targets = append(targets, "https://"+host+":*", "https://*."+host+":*")
	h := rw.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+f.Nonce+"'; "+
		"form-action "+strings.Join(targets, " ")+"; base-uri 'none'; frame-ancestors 'none'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_ = joinTemplate.Execute(rw, f) // an error is a browser that went away
	return nil
}

// joinForm fills joinTemplate.
type joinForm struct {
	Endpoint, ReturnTo, Assertion, Nonce string
}

// joinTemplate posts the assertion in the body, never the URL, as a
// top-level navigation (Poppy 0.1 §5 step 2), and submits itself; the
// button is for a browser without scripts.
var joinTemplate = template.Must(template.New("join").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Joining the Session</title></head>
<body><form id="join" method="post" action="{{.Endpoint}}" enctype="application/x-www-form-urlencoded">
<input type="hidden" name="assertion" value="{{.Assertion}}">
<p>Joining your Session, then opening {{.ReturnTo}}.</p>
<button type="submit">Continue</button></form>
<script nonce="{{.Nonce}}">document.getElementById("join").submit();</script>
</body></html>
`))

// webOrigin is scheme://host[:port] of an https URL.
func webOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// cspNonce is a CSP nonce of 128 random bits.
func cspNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}
