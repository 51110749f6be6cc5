package mcpauth

// This file makes Login the pages Gate of a deployment serving several
// people: a page opened for one person (its owner, the local user who asked
// for it) opens only in a browser signed in as that person. A link passed
// on, by a prompt-injected model or otherwise, opens nothing for anyone
// else, not even another person of the same deployment.

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/pages"
)

var _ pages.Gate = (*Login)(nil)

// Admit admits r when its browser is signed in as the person the page was
// opened for. A browser signed in as nobody is sent to sign in (a GET) and
// comes back to the page; one signed in as someone else is refused, as is
// every browser for a page opened for nobody.
func (l *Login) Admit(w http.ResponseWriter, r *http.Request, owner string) bool {
	if owner == "" {
		message(w, http.StatusForbidden, "Not available", "This page was not opened for a signed-in person.")
		return false
	}
	u, ok := l.Person(r)
	if ok && subtle.ConstantTimeCompare([]byte(u.Key()), []byte(owner)) == 1 {
		return true
	}
	if ok {
		l.r.log.Info("mcpauth: a page was refused to another person", "user", u, "owner", owner[:min(12, len(owner))])
		message(w, http.StatusForbidden, "Not your page",
			"This link was opened for someone else. If you were sent it, do not use it: ask your own assistant for a link of your own.")
		return false
	}
	back := r.URL.EscapedPath()
	if r.Method != http.MethodGet || !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") {
		message(w, http.StatusForbidden, "Sign in first", "Open the link from your assistant again to sign in.")
		return false
	}
	l.start(w, r, back)
	return false
}

// message writes a small page with the pages' own headers.
func message(w http.ResponseWriter, status int, title, text string) {
	pages.Message(w, status, title, text)
}
