package poppytest

// This file is the Company's website, as the Session cookie of web.go opens
// it (Poppy 0.1 §5): a home page and /orders on Domain and www.Domain. Each
// request is handled as the cookie's Session in its CURRENT state, so a
// sign-in or sign-out shows on the next request, and the Session's scopes
// apply as they do on the APIs. Pages are marked for tests: the element
// with id "state" carries data-signed-in="true" or "false".

import (
	"errors"
	"html/template"
	"net/http"
	"slices"
)

// installSite registers the website's pages on the Company's domain d.
func (s *webState) installSite(d string) {
	for _, host := range []string{d, "www." + d} {
		s.HandleFunc(host, "GET /{$}", s.handleHome)
		s.HandleFunc(host, "GET /orders", s.handleOrdersPage)
	}
}

// siteData fills siteTemplate.
type siteData struct {
	Title     string
	SignedIn  bool
	Email     string
	Scopes    []string
	SessionID string // shown so a test can tell Sessions apart; not a credential (§4.2)
	Message   string
	Orders    []Order
	Content   template.HTML // a scenario page's content
}

var siteTemplate = template.Must(template.New("site").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} - Example Company</title></head>
<body><h1>{{.Title}}</h1>
<p id="state" data-signed-in="{{.SignedIn}}" data-session="{{.SessionID}}">{{if .SignedIn}}Signed in as <span id="email">{{.Email}}</span>{{else}}Signed out: you are browsing as a visitor{{end}}</p>
{{if .Message}}<p id="message">{{.Message}}</p>{{end}}
{{if .Content}}<div id="content">{{.Content}}</div>{{end}}
{{if .Orders}}<ul id="orders">{{range .Orders}}<li id="{{.ID}}">{{.ID}}: {{.Summary}} ({{.Status}})</li>
{{end}}</ul>{{end}}
<p><a href="/">Home</a> <a href="/orders">Your orders</a></p>
</body></html>
`))

// webSession returns the Session of the request's cookie as it is now, or
// false for a visitor: no cookie, an unknown one, or one whose Session has
// ended (Poppy 0.1 §5: the cookie "MUST NOT outlive the Session").
func (s *webState) webSession(r *http.Request) (Session, bool) {
	ck, err := r.Cookie(WebCookie)
	if err != nil {
		return Session{}, false
	}
	s.mu.Lock()
	sid, ok := s.cookies[ck.Value]
	s.mu.Unlock()
	if !ok {
		return Session{}, false
	}
	s.Server.mu.Lock()
	defer s.Server.mu.Unlock()
	live := s.sessions[sid]
	if live == nil || live.Ended {
		return Session{}, false
	}
	return live.clone(), true
}

// siteFor is the page data of the request's Session, in its current state.
// Poppy 0.1 §5: the cookie "MUST follow the Session's current state".
func (s *webState) siteFor(r *http.Request, title string) (siteData, Session) {
	d := siteData{Title: title}
	sess, ok := s.webSession(r)
	if !ok {
		return d, Session{}
	}
	d.SessionID, d.SignedIn = sess.ID, sess.SignedIn
	if sess.SignedIn {
		a, _ := s.accountByID(sess.Account)
		d.Email, d.Scopes = a.Email, slices.Clone(sess.Scopes)
	}
	return d, sess
}

func (s *webState) handleHome(w http.ResponseWriter, r *http.Request) {
	d, _ := s.siteFor(r, "Example Company")
	writeSite(w, d)
}

// handleOrdersPage lists the account's orders. Like the APIs, it needs a
// signed-in Session with poppy:read (Poppy 0.1 §5: "The website applies the
// Session's scopes, as the Company's APIs do").
func (s *webState) handleOrdersPage(w http.ResponseWriter, r *http.Request) {
	d, sess := s.siteFor(r, "Your orders")
	switch {
	case !d.SignedIn:
		d.Message = "Sign in to see your orders."
	case !slices.Contains(sess.Scopes, "poppy:read"):
		d.Message = "This Session may not read your orders (it lacks poppy:read)."
	default:
		d.Orders = s.Orders(sess.Account)
		if len(d.Orders) == 0 {
			d.Message = "You have no orders."
		}
	}
	writeSite(w, d)
}

// writeSite writes a website page that no cache keeps.
func writeSite(w http.ResponseWriter, d siteData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = siteTemplate.Execute(w, d)
}

// SignInSession signs the Session sessionID in to account with scopes, as
// a sign-in the User completed whose Account Token the agent never
// received. It is for tests of the website, which follows the Session's
// state, where the agent's own sign-in is not under test. Revoking the
// account's tokens (RevokeAccountTokens) signs the Session out again. The
// agent must not renew the Session with its Session assertion meanwhile
// (Poppy 0.1 §4.2: a signed-in Session is renewed with the Account Token).
func (s *webState) SignInSession(sessionID, account string, scopes ...string) error {
	if _, ok := s.accountByID(account); !ok {
		return errors.New("poppytest: SignInSession: no account " + account)
	}
	s.Server.mu.Lock()
	sess := s.sessions[sessionID]
	clientID := ""
	if sess != nil {
		clientID = sess.ClientID
	}
	s.Server.mu.Unlock()
	if sess == nil {
		return errors.New("poppytest: SignInSession: no Session " + sessionID)
	}
	if _, _, e := s.signInSession(nil, "5", sessionID, clientID, account, scopes); e != nil {
		return errors.New("poppytest: SignInSession: " + e.code + ": " + e.desc)
	}
	return nil
}
