package democompany

// This file is the demo inbox: the page where the person trying the demo
// reads the one-time codes Mediated Sign-In sent, as the User's phone or
// mailbox would show them.

import (
	"html/template"
	"net"
	"net/http"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// InboxPath is the inbox page's path.
const InboxPath = "/demo/inbox"

// inboxEntry is one code on the inbox page.
type inboxEntry struct {
	Sent    time.Time
	Email   string
	SentTo  string
	Code    string
	Expires time.Time
	State   string // "waiting", "finished" or "expired"
}

// Inbox serves the demo inbox: a page of the one-time codes srv sent for
// Mediated Sign-In (Poppy 0.1 §4.7), newest first, each with the account
// (its Email in accounts, the Server's accounts), where it went
// (code.sent_to), and whether it is still waiting. It is for demos, where
// no phone receives them; mount it wherever the person trying the demo
// looks. The codes are secrets (poppytest's IssuedSecrets): serve it to that
// person only, never where the agent or its model reads.
func Inbox(srv *poppytest.Server, accounts []poppytest.Account) http.Handler {
	emails := map[string]string{}
	for _, a := range accounts {
		emails[a.ID] = a.Email
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "democompany: the inbox is read with GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		_ = inboxTemplate.Execute(w, inbox(srv.SentCodes(), emails, time.Now()))
	})
}

// inbox lists codes (oldest first) newest first, at most 20, as of now.
func inbox(codes []poppytest.SentCode, emails map[string]string, now time.Time) []inboxEntry {
	out := make([]inboxEntry, 0, min(len(codes), 20))
	for i := len(codes) - 1; i >= 0 && len(out) < 20; i-- {
		c := codes[i]
		e := inboxEntry{Sent: c.Sent, Email: emails[c.Account], SentTo: c.SentTo, Code: c.Code, Expires: c.Expires, State: "waiting"}
		switch {
		case !now.Before(c.Expires):
			e.State = "expired"
		case c.Finished:
			e.State = "finished"
		}
		out = append(out, e)
	}
	return out
}

var inboxTemplate = template.Must(template.New("inbox").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo inbox - Example Company</title>
<meta http-equiv="refresh" content="5"><meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem}td,th{padding:.3rem .6rem;text-align:left}.code{font:bold 1.4em monospace}</style>
</head><body><h1>Demo inbox</h1>
<p>A real Company sends one-time codes by text message or e-mail. The demo Company has no phone to text, so the codes
it sends for its test accounts appear here. Type a code on poppy-mcp's sign-in page, never to your assistant: a code
is a secret. This page refreshes by itself.</p>
{{if .}}<table id="codes"><tr><th>sent</th><th>account</th><th>sent to</th><th>code</th><th>state</th></tr>
{{range .}}<tr><td>{{.Sent.Format "15:04:05"}}</td><td>{{.Email}}</td><td>{{.SentTo}}</td><td class="code">{{.Code}}</td><td>{{.State}}{{if eq .State "waiting"}} until {{.Expires.Format "15:04:05"}}{{end}}</td></tr>
{{end}}</table>{{else}}<p id="empty">No code has been sent yet.</p>{{end}}
</body></html>
`))

// LoopbackOnly serves h at InboxPath to requests whose Host is addr (or
// localhost at its port), so that no other site's page can read it through
// a name that resolves to 127.0.0.1 (DNS rebinding); other paths redirect
// to InboxPath.
func LoopbackOnly(addr string, h http.Handler) http.Handler {
	_, port, _ := net.SplitHostPort(addr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != addr && r.Host != "localhost:"+port {
			http.Error(w, "poppy-mcp: this page answers only at "+addr, http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path != InboxPath {
			http.Redirect(w, r, InboxPath, http.StatusSeeOther)
			return
		}
		h.ServeHTTP(w, r)
	})
}
