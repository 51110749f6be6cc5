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
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	neturl "net/url"
	"strings"
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
	if _, err := sessionAt(start.sess, co); err != nil {
		return si.sessions.failure(ctx, domain, err)
	}
	f := auth.NewFlow(auth.KindMediated, domain, scopes, nil)
	m := co.Document.Auth.Mediated
	page := mediatedState{pageOwner: pageOwner{Owner: agent.OwnerOf(cs.Person().User()), Domain: domain}, Flow: f.ID,
		Fields: m.Fields, Company: co.Domain, Claim: claimedName(co), Endpoint: hostOf(m.Endpoint)}
	url, closePage, err := si.pages.OpenKindForUser(ctx, mcpauth.KeyFrom(ctx), kindMediated, keptState(page), mediatedPageTTL)
	if err != nil {
		return failure(map[string]string{"error": "no_pages"}, "poppy-mcp could not open the sign-in page (%v). Try again.", err)
	}
	f.Page, f.Expires = url, si.now().Add(mediatedPageTTL)
	f.SetStop(closePage)
	// Poppy 0.1 §4.7: the credentials go to auth.mediated.endpoint; the
	// user must see where, not only the name the Company gives itself.
	f.Note("The page asks for what " + whereTo(co, m.Endpoint) + " wants and sends it only to " + page.Endpoint + ", never to you.")
	cs.Person().SignIns().StartPage(ctx, cs.Issuer(), f) // kept: the page may be used on another replica
	si.log.InfoContext(ctx, "mediated sign-in page opened", "issuer", cs.Issuer())
	if elicitsURL(ctx) {
		return si.elicitURL(ctx, cs, f, url, "Sign in to "+whereTo(co, m.Endpoint)+" on this page of poppy-mcp's own: what you type goes only to "+
			page.Endpoint+", never to your assistant.")
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

// mediatedState is what the page of one Mediated Sign-In keeps between
// requests, which may reach any replica: never a credential or a code.
type mediatedState struct {
	pageOwner
	Flow   string            `json:"flow"` // the sign-in's ID
	Fields []discovery.Field `json:"fields"`
	// Company is the Company's domain and Endpoint the host of
	// auth.mediated.endpoint, what poppy-mcp checked; Claim is the name
	// the Company gives itself, its own claim. html/template escapes all
	// three.
	Company  string `json:"company"`
	Endpoint string `json:"endpoint"`
	Claim    string `json:"claim,omitempty"`
	// Step is the code_required answer, once given
	// (auth.MediatedStep.MarshalKept), SentTo its code.sent_to, and
	// StepSession the ID of the Session that got it: only that Session
	// can finish the sign-in (Poppy 0.1 §4.7).
	Step        json.RawMessage `json:"step,omitempty"`
	SentTo      string          `json:"sent_to,omitempty"`
	StepSession string          `json:"step_session,omitempty"`
}

// mediatedPage serves the page of a Mediated Sign-In on whichever replica
// the browser reaches: the form of its step, and each post, which takes
// the page (one post at a time, on any replica) and is done with this
// replica's Session of the person.
func (si *signIn) mediatedPage(w http.ResponseWriter, r *http.Request, p *pages.Page) {
	var st mediatedState
	ctx, end, ok := si.sessions.forPage(w, r, p, stateOwner(p, &st, &st.pageOwner))
	if !ok {
		return
	}
	defer end()
	f := si.pageFlow(ctx, st.Domain, st.Flow)
	if f == nil || !f.Pending() {
		p.Close(ctx)
		finishedPage(w)
		return
	}
	if r.Method != http.MethodPost {
		st.render(w, http.StatusOK, "")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInForm)
	if err := r.ParseForm(); err != nil {
		st.render(w, http.StatusBadRequest, "The form could not be read. Try again.")
		return
	}
	if !p.Take(ctx) { // another post, here or on another replica, has it
		r.PostForm, r.Form = nil, nil
		finishedPage(w)
		return
	}
	post := &mediatedPost{si: si, p: p, st: &st, f: f}
	post.run(context.WithoutCancel(ctx), w, r)
}

// pageFlow is this replica's picture of the sign-in id a page of the
// person ctx acts for continues, through domain; nil when it is no longer
// the Company's latest.
func (si *signIn) pageFlow(ctx context.Context, domain, id string) *auth.Flow {
	cs, _, err := si.sessions.stateFor(ctx, domain)
	if err != nil {
		return nil
	}
	return cs.Person().SignIns().Picture(ctx, cs.Issuer(), id)
}

// finishedPage answers a page whose sign-in has ended.
func finishedPage(w http.ResponseWriter) {
	pages.Message(w, http.StatusGone, "Sign-in finished", "This sign-in has finished. Return to your assistant.")
}

// mediatedPost is one post of a mediated sign-in page, which has taken
// the page: it gives it back (Keep) when the sign-in goes on.
type mediatedPost struct {
	si   *signIn
	p    *pages.Page
	st   *mediatedState
	f    *auth.Flow
	cs   *agent.Company
	sess *auth.Session
}

// run sends the credentials, or the code, with this replica's Session.
// A browser that leaves (a closed tab, a second click) does not cancel the
// Company's request (ctx does not end with it): the credentials or code it
// took may already have signed the user in. auth bounds each request (30 s).
func (mp *mediatedPost) run(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	defer func() { r.PostForm, r.Form = nil, nil }() // the values are not kept after use
	reached, err := mp.si.sessions.session(ctx, mp.st.Domain, false)
	var at *auth.Site
	if err == nil {
		at, err = sessionAt(reached.sess, reached.co)
	}
	if err != nil {
		mp.si.log.InfoContext(ctx, "mediated sign-in page: no Session", "err", err)
		mp.again(ctx, w, http.StatusServiceUnavailable, "poppy-mcp could not reach the Company just now. Try again.")
		return
	}
	mp.cs, mp.sess = reached.cs, reached.sess
	if mp.st.Step != nil && mp.st.StepSession != mp.sess.Info().ID {
		// The code belongs to a Session of another of poppy-mcp's
		// replicas: this one starts the sign-in again.
		mp.st.Step, mp.st.SentTo, mp.st.StepSession = nil, "", ""
		mp.again(ctx, w, http.StatusOK, "poppy-mcp had to start this sign-in again: enter your details again.")
		return
	}
	var st *auth.MediatedStep
	if step, perr := auth.ParseKeptStep(mp.st.Step); mp.st.Step == nil {
		st, err = at.SignInMediated(ctx, mp.f.Scopes, mp.st.credentials(r))
	} else if err = perr; err == nil {
		// Poppy 0.1 §4.7: the agent "submits only the code, not the credentials again"
		st, err = mp.sess.SubmitCode(ctx, step, auth.NewSecret(r.PostForm.Get("code")))
	}
	mp.outcome(ctx, w, st, err)
}

// again gives the page back with its state and shows its form with message.
func (mp *mediatedPost) again(ctx context.Context, w http.ResponseWriter, status int, message string) {
	if err := mp.p.Keep(ctx, keptState(mp.st)); err != nil {
		mp.si.log.WarnContext(ctx, "mediated sign-in page: could not keep it open", "err", err)
	}
	mp.st.render(w, status, message)
}

// credentials takes one value per Company field, by its exact name.
func (st *mediatedState) credentials(r *http.Request) map[string]auth.Secret {
	creds := make(map[string]auth.Secret, len(st.Fields))
	for _, fd := range st.Fields {
		// Poppy 0.1 §4.7: "The Personal Agent sends every field in credentials"
		creds[fd.Name] = auth.NewSecret(r.PostForm.Get(fd.Name))
	}
	return creds
}

// outcome shows the Company's answer and ends the sign-in when it is final.
func (mp *mediatedPost) outcome(ctx context.Context, w http.ResponseWriter, st *auth.MediatedStep, err error) {
	var wait *auth.RetryAfterError
	switch {
	case errors.As(err, &wait):
		err = fmt.Errorf("too many attempts: the Company asks to wait %d s", int(wait.Wait.Seconds()))
	case err != nil:
	case st.Status == auth.MediatedComplete:
		mp.si.finish(ctx, mp.cs, mp.sess, mp.f, st.SignIn, nil)
		pages.Message(w, http.StatusOK, "Signed in", "You are signed in to "+mp.st.Company+". You can close this page and return to your assistant.")
		return
	case mp.next(ctx, w, st):
		return
	default:
		err = st.Err
	}
	mp.si.finish(ctx, mp.cs, mp.sess, mp.f, nil, err)
	pages.Message(w, http.StatusOK, "Sign-in failed", mp.f.State().Detail+" Return to your assistant.")
}

// next goes on to the sign-in's next step when the Company's answer asks
// for one (a code, the credentials again), and reports whether it did.
func (mp *mediatedPost) next(ctx context.Context, w http.ResponseWriter, st *auth.MediatedStep) bool {
	switch {
	case st.Status == auth.MediatedCodeRequired:
		msg := ""
		if mp.st.Step != nil {
			msg = "That code was not accepted. Try again."
		}
		kept, err := st.MarshalKept()
		if err != nil {
			return false
		}
		mp.st.Step, mp.st.SentTo, mp.st.StepSession = kept, st.SentTo, mp.sess.Info().ID
		mp.again(ctx, w, http.StatusOK, msg)
	case mp.st.Step == nil && errors.Is(st.Err, &auth.Error{Code: "invalid_credentials"}):
		mp.again(ctx, w, http.StatusOK, "Those details were not accepted. Try again.")
	case mp.st.Step != nil && errors.Is(st.Err, auth.ErrAccountMismatch):
		// auth started a new Session, which needs the credentials again.
		mp.st.Step, mp.st.SentTo, mp.st.StepSession = nil, "", ""
		mp.again(ctx, w, http.StatusOK, "Your assistant had been signed in to another account here, so it started afresh: enter your details again.")
	default:
		return false
	}
	return true
}

// render writes the form of the current step.
func (st *mediatedState) render(w http.ResponseWriter, status int, message string) {
	d := mediatedPageData{Domain: st.Company, Endpoint: st.Endpoint, Claim: st.Claim, Message: message, Fields: st.Fields}
	if st.Step != nil {
		d.Code, d.SentTo = true, st.SentTo
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
