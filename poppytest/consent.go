package poppytest

// This file serves the pages a person uses to sign in and approve: the
// device verification page (Poppy 0.1 §4.6 step 2, RFC 8628 §3.3) and the
// consent page of Direct Sign-In (§4.5 step 2). Both show which Personal
// Agent is asking, by the client_name of its metadata document, and the
// scopes requested, and take a test account's email and password. Opening a
// page never approves anything: only a POST with action=approve does.

import (
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"slices"
)

// maxPageForm bounds a posted page form.
const maxPageForm = 16 << 10

// scopeChoice is one scope on a page, with what it grants.
type scopeChoice struct {
	Name, Description string
}

// pageData fills pageTemplate.
type pageData struct {
	Title      string
	Message    string // a result or an error, shown above the form
	ClientName string
	Scopes     []scopeChoice
	AskCode    bool   // show the user code entry form
	Action     string // where the approval form posts; "" for no form
	Hidden     map[string]string
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1>
{{if .Message}}<p id="message">{{.Message}}</p>{{end}}
{{if .AskCode}}<form method="get" action="/device">
<label>Code <input name="user_code" autocomplete="off" required></label>
<button type="submit">Continue</button></form>{{end}}
{{if .Action}}<p><strong id="client-name">{{.ClientName}}</strong> is asking for access to your account:</p>
<form method="post" action="{{.Action}}">
{{range $k, $v := .Hidden}}<input type="hidden" name="{{$k}}" value="{{$v}}">
{{end}}<ul>{{range .Scopes}}<li><label><input type="checkbox" name="scope" value="{{.Name}}" checked> {{.Name}}: {{.Description}}</label></li>
{{end}}</ul>
<label>Email <input name="email" type="email" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit" name="action" value="approve">Approve</button>
<button type="submit" name="action" value="deny">Decline</button>
</form>{{end}}
</body></html>
`))

// writePage writes an HTML page that no cache keeps.
func writePage(w http.ResponseWriter, status int, p pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, p)
}

// scopeChoices describes scopes for a page (Poppy 0.1 §4.4 and auth.custom_scopes).
func (s *signInState) scopeChoices(scopes []string) []scopeChoice {
	custom, _ := s.poppyAuth()["custom_scopes"].(map[string]any)
	var out []scopeChoice
	for _, sc := range scopes {
		desc, _ := custom[sc].(string)
		switch sc {
		case "poppy:read":
			desc = "Read your account information (orders, addresses, history)"
		case "poppy:write":
			desc = "Make changes on your account (orders, returns, settings)"
		}
		out = append(out, scopeChoice{Name: sc, Description: desc})
	}
	return out
}

// readPageForm parses a page's posted form. Repeated scope fields are the
// checkboxes; a page is a person's browser, so no violation is reported.
func readPageForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		writePage(w, http.StatusUnsupportedMediaType, pageData{Title: "Error", Message: "The form must be sent as application/x-www-form-urlencoded."})
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxPageForm)
	if err := r.ParseForm(); err != nil {
		writePage(w, http.StatusBadRequest, pageData{Title: "Error", Message: "The form could not be read."})
		return nil, false
	}
	return r.PostForm, true
}

// pageLogin checks a page's email and password and the scopes ticked, and
// writes the page again with the problem when they fail.
func (s *signInState) pageLogin(w http.ResponseWriter, form url.Values, p pageData) (Account, []string, bool) {
	a, ok := s.login(form.Get("email"), form.Get("password"))
	if !ok {
		p.Message = "Wrong email or password."
		writePage(w, http.StatusUnauthorized, p)
		return Account{}, nil, false
	}
	scopes := slices.DeleteFunc(form["scope"], func(sc string) bool { return sc == "" })
	if len(scopes) == 0 {
		p.Message = "Choose at least one permission, or decline."
		writePage(w, http.StatusBadRequest, p)
		return Account{}, nil, false
	}
	return a, scopes, true
}

// handleVerifyPage shows the device verification page. With a known
// user_code it shows the agent and scopes and the sign-in form; it never
// approves (Poppy 0.1 §4.6: "Opening the link MUST NOT approve the request
// by itself.").
func (s *signInState) handleVerifyPage(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("user_code")
	if code == "" {
		writePage(w, http.StatusOK, pageData{Title: "Connect a device", AskCode: true,
			Message: "Enter the code shown by your assistant."})
		return
	}
	p, status := s.devicePage(code)
	writePage(w, status, p)
}

// devicePage is the page of a user code and its status.
func (s *signInState) devicePage(code string) (pageData, int) {
	s.mu.Lock()
	d, err := s.deviceByUserCodeLocked(code)
	var decided, expired bool
	if err == nil {
		decided, expired = d.status != devicePending, !s.timeNow().Before(d.expires)
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		return pageData{Title: "Connect a device", AskCode: true, Message: "That code is not valid. Check it and try again."}, http.StatusNotFound
	case expired:
		return pageData{Title: "Connect a device", Message: "That code has expired. Ask your assistant to start again."}, http.StatusGone
	case decided:
		return pageData{Title: "Connect a device", Message: "This request has already been answered."}, http.StatusConflict
	}
	return pageData{Title: "Connect a device", ClientName: d.client.name, Scopes: s.scopeChoices(d.scopes),
		Action: verifyPath, Hidden: map[string]string{"user_code": d.userCode}}, http.StatusOK
}

// handleVerifyPost takes the User's answer on the verification page.
func (s *signInState) handleVerifyPost(w http.ResponseWriter, r *http.Request) {
	form, ok := readPageForm(w, r)
	if !ok {
		return
	}
	code := form.Get("user_code")
	p, status := s.devicePage(code)
	if status != http.StatusOK {
		writePage(w, status, p)
		return
	}
	if form.Get("action") == "deny" {
		if err := s.DenyDevice(code); err != nil {
			writePage(w, http.StatusConflict, pageData{Title: p.Title, Message: err.Error()})
			return
		}
		writePage(w, http.StatusOK, pageData{Title: p.Title, Message: "You declined. " + p.ClientName + " was not given access."})
		return
	}
	a, scopes, ok := s.pageLogin(w, form, p)
	if !ok {
		return
	}
	if err := s.ApproveDevice(code, a.ID, scopes...); err != nil {
		p.Message = err.Error()
		writePage(w, http.StatusBadRequest, p)
		return
	}
	writePage(w, http.StatusOK, pageData{Title: p.Title, Message: "Approved. You can return to " + p.ClientName + "."})
}
