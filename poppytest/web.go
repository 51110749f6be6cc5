package poppytest

// This file implements the Company's side of web browsing (Poppy 0.1 §5):
// the browser-session endpoint at https://<domain>/poppy/browser-session
// (on each of the Company's domains, for return_to on that domain),
// where the agent's browser posts a signed browser assertion and gets the
// Company's own Session cookie, with every check §5 lists. The website that
// cookie opens is in web_site.go.

import (
	"encoding/json"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// WebCookie is the name of the Session cookie the website sets. The spec
// leaves the name to the Company (Poppy 0.1 §5: "The Company chooses its
// name, value, the hosts it covers, and its lifetime").
const WebCookie = "poppytest_session"

const (
	// maxBrowserAssertionLife bounds exp-iat of a browser assertion.
	// Poppy 0.1 §5: "exp is no more than 60 seconds after iat."
	maxBrowserAssertionLife = 60 * time.Second
	// maxBrowserForm bounds the body posted to the browser-session endpoint.
	maxBrowserForm = 16 << 10
)

// webState is the Server's concern of web browsing (Poppy 0.1 §5): the
// browser-session endpoint and the website, with the cookies it set.
type webState struct {
	*Server
	// mu guards cookies. In webState's methods, s.mu is this lock;
	// s.Server.mu is the Server's, which guards the Sessions.
	mu      sync.Mutex
	cookies map[string]string // cookie value -> Session ID
}

// browserClaims are the claims of a browser assertion (Poppy 0.1 §5).
type browserClaims struct {
	jwtClaims
	SessionID string `json:"session_id"`
	ReturnTo  string `json:"return_to"`
}

// installWeb registers the browser-session endpoint and the website.
func (s *webState) installWeb() {
	s.cookies = map[string]string{}
	s.installWebOn(s.domain)
}

// installWebOn registers the browser-session endpoint and the website of
// the Company's domain d.
func (s *webState) installWebOn(d string) {
	s.HandleFunc(d, "POST "+browserPath, s.handleBrowserSession)
	s.HandleFunc(d, browserPath, s.handleBrowserSessionMethod)
	s.installSite(d)
}

// BrowserSessionEndpoint is the web.browser_session_endpoint of the default
// poppy.json.
func (s *webState) BrowserSessionEndpoint() string { return s.URL(s.domain, browserPath) }

// handleBrowserSession checks a posted browser assertion and, if every check
// passes, sets the Session cookie and redirects to return_to.
func (s *webState) handleBrowserSession(w http.ResponseWriter, r *http.Request) {
	sid, returnTo, e := s.checkBrowserSession(r)
	if e != nil {
		// Poppy 0.1 §5: "If not, it sets no cookie and returns an error page with HTTP 400."
		s.countServed("browser_session_refused")
		writeWebError(w, e.desc)
		return
	}
	value := "wsc_" + randomString(32)
	s.mu.Lock()
	s.cookies[value] = sid
	s.mu.Unlock()
	s.addSecret(value) // a credential of the browser: the agent must never show it
	// Poppy 0.1 §5: "MUST be Secure and HttpOnly, and use SameSite=Lax or None, not Strict."
	http.SetCookie(w, &http.Cookie{Name: WebCookie, Value: value, Path: "/", Domain: s.domainOf(hostOnly(r.Host)),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	s.countServed("browser_session")
	// Poppy 0.1 §5: "the Company sets a cookie for the Session and responds with 303 See Other to return_to"
	http.Redirect(w, r, returnTo, http.StatusSeeOther)
}

// handleBrowserSessionMethod answers the endpoint for methods other than
// POST, as a real Company does. An assertion sent in such a request's URL is
// already reported by checkEveryRequest (Poppy 0.1 §5: "The assertion MUST go
// in the request body, never in the URL.").
func (s *webState) handleBrowserSessionMethod(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusMethodNotAllowed)
	_, _ = io.WriteString(w, "poppytest: the browser-session endpoint takes a form POST\n")
}

// checkBrowserSession applies every check of Poppy 0.1 §5 step 3 and
// returns the Session to join and where to send the browser.
func (s *webState) checkBrowserSession(r *http.Request) (sid, returnTo string, e *oauthError) {
	if e := s.checkNavigation(r); e != nil {
		return "", "", e
	}
	raw, e := s.readBrowserForm(r)
	if e != nil {
		return "", "", e
	}
	c, claims, e := s.verifyBrowserAssertion(r, raw)
	if e != nil {
		return "", "", e
	}
	endpoint := s.URL(hostOnly(r.Host), r.URL.Path)
	if e := s.checkBrowserClaims(r, claims, c.id, endpoint); e != nil {
		return "", "", e
	}
	if e := s.checkBrowserSessionID(r, claims, c.id, s.domainOf(hostOnly(r.Host))); e != nil {
		return "", "", e
	}
	if s.useJTI("browser "+c.id, claims.Jti, unixTime(*claims.Exp)) {
		// Poppy 0.1 §5: the Company MUST check that "It hasn't accepted the same jti before."
		return "", "", s.agentBug(r, "5", "invalid_grant", "browser assertion jti %q was accepted before", claims.Jti)
	}
	return claims.SessionID, claims.ReturnTo, nil
}

// checkNavigation checks, where the browser says so (Fetch Metadata), that
// the post is a top-level navigation.
func (s *webState) checkNavigation(r *http.Request) *oauthError {
	mode, dest := r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Sec-Fetch-Dest")
	if (mode != "" && mode != "navigate") || (dest != "" && dest != "document") {
		// Poppy 0.1 §5: "as a form POST, as a top-level navigation, so the cookie the Company sets lands in that browser"
		return s.agentBug(r, "5", "invalid_request", "browser assertion posted with Sec-Fetch-Mode %q and Sec-Fetch-Dest %q, not as a top-level navigation", mode, dest)
	}
	return nil
}

// readBrowserForm reads the form body and returns its one assertion.
func (s *webState) readBrowserForm(r *http.Request) (string, *oauthError) {
	if r.URL.RawQuery != "" && url.Values(r.URL.Query()).Has("assertion") {
		// Poppy 0.1 §5: "The assertion MUST go in the request body, never in the URL."
		return "", s.agentBug(r, "5", "invalid_request", "the browser assertion is in the URL")
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return "", s.agentBug(r, "5", "invalid_request", "Content-Type %q, want application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBrowserForm+1))
	if err != nil || len(body) > maxBrowserForm {
		return "", newError("invalid_request", "body unreadable or larger than %d bytes", maxBrowserForm)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || len(form["assertion"]) != 1 || form.Get("assertion") == "" {
		return "", s.agentBug(r, "5", "invalid_request", "the form has no single assertion")
	}
	raw := form.Get("assertion")
	s.addSecret(raw)
	return raw, nil
}

// verifyBrowserAssertion checks the signature and typ of a browser
// assertion and returns the agent that signed it and its claims.
func (s *webState) verifyBrowserAssertion(r *http.Request, raw string) (*client, *browserClaims, *oauthError) {
	var unverified jwtClaims
	if jws, err := jose.ParseSignedCompact(raw, assertionAlgs); err != nil ||
		json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &unverified) != nil || unverified.Iss == "" {
		return nil, nil, s.agentBug(r, "5", "invalid_grant", "the browser assertion is not a JWT signed with %v naming its iss", assertionAlgs)
	}
	c, cached, e := s.loadClient(r, unverified.Iss, false)
	if e != nil {
		return nil, nil, e
	}
	h, payload, err := verifyJWT(raw, c.keys)
	if err != nil && cached {
		// The agent may have rotated its keys: fetch them again, once.
		if c, _, e = s.loadClient(r, unverified.Iss, true); e != nil {
			return nil, nil, e
		}
		h, payload, err = verifyJWT(raw, c.keys)
	}
	if err != nil {
		// Poppy 0.1 §5: "The signature verifies with a key from the iss client's jwks_uri"
		return nil, nil, s.agentBug(r, "5", "invalid_grant", "browser assertion: %v", err)
	}
	if typ := headerType(h); !strings.EqualFold(typ, browserAssertionTyp) {
		// Poppy 0.1 §5: "typ is poppy-browser+jwt. A Session assertion isn't accepted here"
		return nil, nil, s.agentBug(r, "5", "invalid_grant", "browser assertion typ %q, want %s", typ, browserAssertionTyp)
	}
	var claims browserClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, nil, s.agentBug(r, "5", "invalid_grant", "browser assertion claims: %v", err)
	}
	return c, &claims, nil
}

// checkBrowserClaims checks iss, sub, aud, times and jti (Poppy 0.1 §5).
func (s *webState) checkBrowserClaims(r *http.Request, c *browserClaims, clientID, endpoint string) *oauthError {
	if c.Iss != clientID || c.Sub == "" {
		// Poppy 0.1 §5: "iss, sub, iat, and jti are as in 4.2."
		return s.agentBug(r, "5", "invalid_grant", "browser assertion iss %q (want %q) or sub %q", c.Iss, clientID, c.Sub)
	}
	if auds, single := c.audiences(); !single || auds[0] != endpoint {
		// Poppy 0.1 §5: "aud is its endpoint"
		return s.agentBug(r, "5", "invalid_grant", "browser assertion aud %s is not the single string %q", c.Aud, endpoint)
	}
	if c.Exp != nil && !unixTime(*c.Exp).After(s.timeNow()) {
		// Poppy 0.1 §5: the Company checks "the assertion hasn't expired"; a slow browser gets here too
		return newError("invalid_grant", "the browser assertion expired %s ago", s.timeNow().Sub(unixTime(*c.Exp)).Round(time.Second))
	}
	if p := s.timeProblem(&c.jwtClaims, maxBrowserAssertionLife, true); p != "" {
		// Poppy 0.1 §5: "exp is no more than 60 seconds after iat."
		return s.agentBug(r, "5", "invalid_grant", "browser assertion: %s", p)
	}
	if len(c.Jti) < minJTILength {
		// Poppy 0.1 §4.2: "jti is a unique ID for the assertion, with at least 128 random bits"
		return s.agentBug(r, "5", "invalid_grant", "browser assertion jti %q is shorter than %d characters (128 bits)", c.Jti, minJTILength)
	}
	return nil
}

// checkBrowserSessionID checks the Session, and that return_to is on
// domain, the Company's domain whose endpoint the assertion was posted to
// (Poppy 0.1 §5).
func (s *webState) checkBrowserSessionID(r *http.Request, c *browserClaims, clientID, domain string) *oauthError {
	s.Server.mu.Lock()
	live := s.sessions[c.SessionID]
	var sess Session
	if live != nil {
		sess = live.clone()
	}
	s.Server.mu.Unlock()
	switch {
	case c.SessionID == "" || live == nil:
		// Poppy 0.1 §5: "session_id is the Session the browser joins"
		return s.agentBug(r, "5", "invalid_session", "browser assertion session_id %q names no Session", c.SessionID)
	case sess.ClientID != clientID || sess.UserID != c.Sub:
		// Poppy 0.1 §5: the Company checks "The Session is active and belongs to the same client_id and User."
		return s.agentBug(r, "5", "invalid_session", "Session %s belongs to another client_id or User", c.SessionID)
	case sess.Ended:
		return newError("invalid_session", "Session %s has ended", c.SessionID)
	}
	if !onDomain(domain, c.ReturnTo) {
		// Poppy 0.1 §5: return_to "MUST be an HTTPS URL on the Company's organization.domain or one of its subdomains."
		return s.agentBug(r, "5", "invalid_request", "return_to %q is not an https URL on %s", c.ReturnTo, domain)
	}
	return nil
}

// onDomain reports whether raw is an https URL on domain or a subdomain.
func onDomain(domain, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Host == "" {
		return false
	}
	return onHost(domain, hostOnly(u.Host))
}

// onHost reports whether host is domain or one of its subdomains.
func onHost(domain, host string) bool { return host == domain || strings.HasSuffix(host, "."+domain) }

var webErrorTemplate = template.Must(template.New("web-error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Could not join the Session</title></head>
<body><h1>Could not join the Session</h1><p id="error">{{.}}</p></body></html>
`))

// writeWebError writes the browser-session endpoint's 400 page.
func writeWebError(w http.ResponseWriter, desc string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	_ = webErrorTemplate.Execute(w, desc)
}
