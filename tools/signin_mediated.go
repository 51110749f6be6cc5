package tools

// This file serves sign_in_mediated: Mediated Sign-In (Poppy 0.1 §4.7)
// through a one-time local page (docs/tools.md "Local pages"). The page is an
// HTML form with one input per auth.mediated.fields entry, named exactly as
// the field, then, if the Company asks, a form for the one-time code showing
// code.sent_to. The values go only to auth.mediated.endpoint (the code to
// {endpoint}/{sign_in_id}) with the Session Token, and are neither logged,
// shown back, kept after use, nor put in any result: MCP forbids form-mode
// elicitation for passwords and codes, so the page is offered by URL mode.

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// mediatedPageTTL is how long the sign-in page stays open.
const mediatedPageTTL = 10 * time.Minute

// maxSignInForm bounds a posted sign-in form.
const maxSignInForm = 16 << 10

func (si *signIn) mediatedTool() tool {
	return newTool("sign_in_mediated",
		"Sign the user in with the credentials the Company asks for, typed by the user on a one-time local page "+
			"(never through you). Offers the page to the client, or returns sign_in_url for the user to open. "+
			"Then call sign_in_status with wait_seconds.",
		annotations{title: "Sign in with credentials", openWorld: true},
		si.mediated)
}

func (si *signIn) mediated(ctx context.Context, req mcp.CallToolRequest, args signInArgs) *mcp.CallToolResult {
	domain := args.Domain
	start, done := si.begin(ctx, req, args, auth.KindMediated)
	if done != nil {
		return done
	}
	cs, co, scopes := start.cs, start.co, start.scopes
	if si.pages == nil {
		return failure(map[string]string{"error": "no_pages"},
			"This poppy-mcp serves no local pages, so it cannot collect credentials. Use sign_in_device or sign_in_direct if %s offers them.", domain)
	}
	// Poppy 0.1 §3.2: the Session is the Company's; the endpoint is this domain's.
	at, err := sessionAt(start.sess, co)
	if err != nil {
		return si.sessions.failure(ctx, domain, err)
	}
	f := auth.NewFlow(auth.KindMediated, domain, scopes, nil)
	m := co.Document.Auth.Mediated
	mp := &mediatedPage{si: si, cs: cs, sess: start.sess, at: at, f: f, fields: m.Fields,
		domain: co.Domain, claim: claimedName(co), endpoint: hostOf(m.Endpoint)}
	url, closePage := si.pages.OpenForUser(mcpauth.KeyFrom(ctx), mp.serve, mediatedPageTTL)
	f.Page, f.Expires = url, si.now().Add(mediatedPageTTL)
	f.SetStop(closePage)
	// Poppy 0.1 §4.7: the credentials go to auth.mediated.endpoint; the
	// user must see where, not only the name the Company gives itself.
	f.Note("The page asks for what " + whereTo(co, m.Endpoint) + " wants and sends it only to " + mp.endpoint + ", never to you.")
	si.replace(cs, f)
	si.log.InfoContext(ctx, "mediated sign-in page opened", "issuer", cs.Issuer())
	if elicitsURL(ctx) {
		return si.elicitURL(ctx, cs, f, url, "Sign in to "+whereTo(co, m.Endpoint)+" on this page of poppy-mcp's own: what you type goes only to "+
			mp.endpoint+", never to your assistant.")
	}
	return si.flowResult(cs, f, "")
}

// claimedName is the name the Company gives itself (organization.name),
// cleaned, or "": it is the Company's claim, and a hostile one can call
// itself anything ("Google Account").
func claimedName(co *discovery.Company) string {
	if co.Document.Organization == nil {
		return ""
	}
	return untrusted.Text(co.Document.Organization.Name, 80)
}

// whereTo names a Company for the user by what poppy-mcp checked, its
// domain, with its claimed name as a claim and, when credentials go to an
// endpoint, that endpoint's host: `example.com (which calls itself "Example
// Shop"; credentials go to auth.example.com)`.
func whereTo(co *discovery.Company, endpoint string) string {
	var notes []string
	if name := claimedName(co); name != "" && !strings.EqualFold(name, co.Domain) {
		notes = append(notes, "which calls itself "+untrusted.Quote(name, 80))
	}
	if endpoint != "" {
		notes = append(notes, "credentials go to "+hostOf(endpoint))
	}
	if len(notes) == 0 {
		return co.Domain
	}
	return co.Domain + " (" + strings.Join(notes, "; ") + ")"
}

// hostOf is the host of an https URL, for the user to see where data goes.
func hostOf(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.Host == "" {
		return untrusted.Text(raw, 200)
	}
	return strings.ToLower(u.Host)
}

// mediatedPage is the local page of one Mediated Sign-In. It is safe for
// concurrent use: posts are taken one at a time.
type mediatedPage struct {
	si     *signIn
	cs     *agent.Company
	sess   *auth.Session
	at     *auth.Site // the Session at the domain whose auth.mediated.endpoint takes the credentials
	f      *auth.Flow
	fields []discovery.Field
	// domain is the Company's domain and endpoint the host of
	// auth.mediated.endpoint, what poppy-mcp checked; claim is the name the
	// Company gives itself, its own claim. html/template escapes all three.
	domain, endpoint, claim string

	// mu is held while a post is handled; it guards step.
	mu   sync.Mutex
	step *auth.MediatedStep // the code_required answer, once given
}

func (p *mediatedPage) serve(w http.ResponseWriter, r *http.Request, done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.f.Pending() {
		done()
		pages.Message(w, http.StatusGone, "Sign-in finished", "This sign-in has finished. Return to your assistant.")
		return
	}
	if r.Method != http.MethodPost {
		p.render(w, http.StatusOK, "")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInForm)
	if err := r.ParseForm(); err != nil {
		p.render(w, http.StatusBadRequest, "The form could not be read. Try again.")
		return
	}
	// A browser that leaves (a closed tab, a second click) does not cancel
	// the Company's request: the credentials or code it took may already
	// have signed the user in. auth bounds each request (30 s).
	ctx := p.cs.Person().WithPerson(context.WithoutCancel(r.Context()))
	var st *auth.MediatedStep
	var err error
	if p.step == nil {
		st, err = p.at.SignInMediated(ctx, p.f.Scopes, p.credentials(r))
	} else {
		// Poppy 0.1 §4.7: the agent "submits only the code, not the credentials again"
		st, err = p.sess.SubmitCode(ctx, p.step, auth.NewSecret(r.PostForm.Get("code")))
	}
	r.PostForm, r.Form = nil, nil // the values are not kept after use
	p.outcome(w, r, st, err, done)
}

// credentials takes one value per Company field, by its exact name.
func (p *mediatedPage) credentials(r *http.Request) map[string]auth.Secret {
	creds := make(map[string]auth.Secret, len(p.fields))
	for _, fd := range p.fields {
		// Poppy 0.1 §4.7: "The Personal Agent sends every field in credentials"
		creds[fd.Name] = auth.NewSecret(r.PostForm.Get(fd.Name))
	}
	return creds
}

// outcome shows the Company's answer and ends the flow when it is final.
func (p *mediatedPage) outcome(w http.ResponseWriter, r *http.Request, st *auth.MediatedStep, err error, done func()) {
	ctx := p.cs.Person().WithPerson(context.WithoutCancel(r.Context()))
	var wait *auth.RetryAfterError
	switch {
	case errors.As(err, &wait):
		p.si.finish(ctx, p.cs, p.sess, p.f, nil, fmt.Errorf("too many attempts: the Company asks to wait %d s", int(wait.Wait.Seconds())))
	case err != nil:
		p.si.finish(ctx, p.cs, p.sess, p.f, nil, err)
	case st.Status == auth.MediatedComplete:
		p.si.finish(ctx, p.cs, p.sess, p.f, st.SignIn, nil)
		done()
		pages.Message(w, http.StatusOK, "Signed in", "You are signed in to "+p.domain+". You can close this page and return to your assistant.")
		return
	case st.Status == auth.MediatedCodeRequired:
		again := p.step != nil
		p.step = st
		msg := ""
		if again {
			msg = "That code was not accepted. Try again."
		}
		p.render(w, http.StatusOK, msg)
		return
	case p.step == nil && errors.Is(st.Err, &auth.Error{Code: "invalid_credentials"}):
		p.render(w, http.StatusOK, "Those details were not accepted. Try again.")
		return
	case p.step != nil && errors.Is(st.Err, auth.ErrAccountMismatch):
		// auth started a new Session, which needs the credentials again.
		p.step = nil
		p.render(w, http.StatusOK, "Your assistant had been signed in to another account here, so it started afresh: enter your details again.")
		return
	default:
		p.si.finish(ctx, p.cs, p.sess, p.f, nil, st.Err)
	}
	done()
	detail := p.f.State().Detail
	pages.Message(w, http.StatusOK, "Sign-in failed", detail+" Return to your assistant.")
}

// render writes the form of the current step.
func (p *mediatedPage) render(w http.ResponseWriter, status int, message string) {
	d := mediatedPageData{Domain: p.domain, Endpoint: p.endpoint, Claim: p.claim, Message: message, Fields: p.fields}
	if p.step != nil {
		d.Code, d.SentTo = true, p.step.SentTo
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	w.WriteHeader(status)
	_ = mediatedTmpl.Execute(w, d)
}

type mediatedPageData struct {
	Domain, Endpoint, Claim, Message, SentTo string
	Code                                     bool
	Fields                                   []discovery.Field
}

var mediatedTmpl = template.Must(template.New("mediated").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in to {{.Domain}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}label,input,button{display:block;margin:.5rem 0}
#where{border:2px solid #333;padding:.5rem 1rem}#where code{font-size:1.2em;font-weight:bold}</style>
</head><body><h1>Sign in to <code>{{.Domain}}</code></h1>
<div id="where"><p>What you type here goes to <code id="endpoint">{{.Endpoint}}</code>, the sign-in service <code>{{.Domain}}</code> names. Check that this is who you mean to sign in with.</p>
{{if .Claim}}<p id="claim">The Company calls itself &ldquo;{{.Claim}}&rdquo;: that name is its own claim; the addresses above are what poppy-mcp checked.</p>{{end}}</div>
<p>This page is served by poppy-mcp, your assistant's Personal Agent. Your assistant never sees what you type.</p>
{{if .Message}}<p id="message"><strong>{{.Message}}</strong></p>{{end}}
<form method="post">
{{if .Code}}<p id="sent-to"><code>{{.Domain}}</code> sent you a one-time code: {{.SentTo}}</p>
<label>Code <input name="code" autocomplete="one-time-code" inputmode="numeric" required></label>
{{else}}{{range .Fields}}<label>{{.Label}} <input name="{{.Name}}" type="{{if .Secret}}password{{else}}text{{end}}" autocomplete="off" required></label>
{{end}}{{end}}<button type="submit">Continue</button>
</form></body></html>
`))
