package pages

// This file decides whose browser may open a page served under PublicURL.
// A page link is a capability, and it can travel: a prompt-injected model
// can pass it on in a message. Loopback pages hold through the machine
// boundary; a public page must prove that its visitor is the person it was
// opened for (MCP's URL-mode elicitation asks the server to make sure of
// that). One person's deployment proves it with its own credential, shown
// once in the browser and then kept in a cookie only this origin gets.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"net/http"
	"path"
	"time"
)

// Gate decides who may open the pages served under PublicURL. It is the seam
// where a deployment says whose pages they are: CredentialGate for one
// person's deployment; a deployment serving several people admits a browser
// signed in as the person a page was opened for (package mcpauth's Login).
type Gate interface {
	// Admit reports whether r comes from a browser that may open the page
	// it asks for, which was opened for owner (OpenForUser; "" in one
	// person's deployment). When it does not, Admit has answered r itself
	// (a form asking for a credential, a redirect to a sign-in, a refusal).
	Admit(w http.ResponseWriter, r *http.Request, owner string) bool
}

// GateCookie is the name of the cookie CredentialGate sets. The __Host-
// prefix makes browsers keep it only when it is Secure, has Path=/ and no
// Domain, so no other host can set or read it.
const GateCookie = "__Host-poppy-pages"

// gateCookieLife is how long a browser stays admitted; a restart of
// poppy-mcp (a new per-process key) ends it sooner.
const gateCookieLife = 7 * 24 * time.Hour

// credentialField is the name of the form field that carries the credential.
const credentialField = "poppy_credential"

// maxGateForm bounds a posted credential form.
const maxGateForm = 4 << 10

// CredentialGate admits a browser that has shown the deployment's credential
// (the HTTP bearer token MCP clients send) once: a page opened without its
// cookie asks for the credential in a form posted to the page itself, then
// sets the cookie and reloads the page. The cookie's value is an HMAC of the
// credential under a key made for this process, never the credential. It is
// safe for concurrent use.
type CredentialGate struct {
	key  []byte // per process: a restart signs every browser out
	want []byte // mac(credential)
}

// NewCredentialGate returns a gate for credential, which must not be empty.
func NewCredentialGate(credential string) *CredentialGate {
	g := &CredentialGate{key: make([]byte, 32)}
	rand.Read(g.key)
	g.want = g.mac(credential)
	return g
}

func (g *CredentialGate) mac(credential string) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte("poppy-mcp pages credential\x00"))
	m.Write([]byte(credential))
	return m.Sum(nil)
}

// Admit admits a browser with the cookie, whoever the page's owner: one
// person's deployment has one. Without it, a POST carrying the credential
// sets the cookie and sends the browser back to the page with a 303 (the
// pages' own check has already refused a cross-site POST); anything else
// gets the form.
func (g *CredentialGate) Admit(w http.ResponseWriter, r *http.Request, _ string) bool {
	if c, err := r.Cookie(GateCookie); err == nil {
		if got, err := base64.RawURLEncoding.DecodeString(c.Value); err == nil && hmac.Equal(got, g.want) {
			return true
		}
	}
	if r.Method != http.MethodPost {
		g.form(w, http.StatusUnauthorized, "")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxGateForm)
	if err := r.ParseForm(); err != nil || !r.PostForm.Has(credentialField) {
		g.form(w, http.StatusUnauthorized, "")
		return false
	}
	// Both sides are HMACs of the same length: the comparison tells nothing
	// about the credential's length or its first differing byte.
	if subtle.ConstantTimeCompare(g.mac(r.PostForm.Get(credentialField)), g.want) != 1 {
		g.form(w, http.StatusUnauthorized, "That is not this deployment's access token. Try again.")
		return false
	}
	http.SetCookie(w, &http.Cookie{
		Name: GateCookie, Value: base64.RawURLEncoding.EncodeToString(g.want),
		Path: "/", Secure: true, HttpOnly: true, MaxAge: int(gateCookieLife / time.Second),
		// Lax, not Strict: the user arrives on a page by following a link
		// from another site (the assistant's), a top-level navigation that
		// Strict would send without the cookie.
		SameSite: http.SameSiteLaxMode,
	})
	// 303 to the same URL: the page now loads with a GET and the cookie.
	// The reference is relative (the last path segment, the page's token),
	// so it holds behind a proxy that serves the pages under another path.
	w.Header().Set("Location", "./"+path.Base(r.URL.Path))
	w.WriteHeader(http.StatusSeeOther)
	return false
}

// form asks for the credential.
func (g *CredentialGate) form(w http.ResponseWriter, status int, message string) {
	secureHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = gateTmpl.Execute(w, struct{ Message, Field string }{message, credentialField})
}

var gateTmpl = template.Must(template.New("gate").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>poppy-mcp: who is this?</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}label,input,button{display:block;margin:.5rem 0}</style>
</head><body><h1>This page is for the owner of this poppy-mcp</h1>
<p>Links to poppy-mcp's pages work only in a browser that has shown this deployment's access token once
(the bearer token your MCP client sends). Enter it to continue; this browser then keeps a cookie for this site only.
If someone else sent you this link, do not continue.</p>
{{if .Message}}<p id="message"><strong>{{.Message}}</strong></p>{{end}}
<form method="post"><label>Access token <input name="{{.Field}}" type="password" autocomplete="current-password" required></label>
<button type="submit">Continue</button></form></body></html>
`))
