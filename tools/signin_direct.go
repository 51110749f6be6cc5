package tools

// This file serves sign_in_direct: Direct Sign-In (Poppy 0.1 §4.5), the
// authorization code flow with PKCE, and the callback the Company sends the
// user's browser back to. The callback is served by poppy-mcp in HTTP mode
// at Options.PublicURL + CallbackPath, which must be one of the redirect_uris
// the agent publishes (§4.1); without one, the tool says to use Device
// Sign-In.
//
// The sign-in is tied to the browser that starts it. The model gets a
// one-time poppy-mcp page, never the authorization URL (it carries state and
// code_challenge): opening the page sets a cookie bound to this sign-in and
// sends the browser on to the Company. The callback counts only with that
// cookie, and the state is used up only by a code exchange that succeeds,
// so a callback forged by someone who saw a link leaves the real one
// working.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// CallbackPath is where Direct Sign-In returns under Options.PublicURL; mount
// CallbackHandler there.
const CallbackPath = "/oauth/callback"

// directTTL is how long poppy-mcp waits for the user to come back.
const directTTL = 10 * time.Minute

// maxDirectCallbacks is how many callbacks that cannot be used (a forged
// code, another iss) a Direct Sign-In takes before it fails.
const maxDirectCallbacks = 5

// directCookiePrefix starts the name of the cookie that binds a browser to
// one Direct Sign-In; the flow's ID follows. __Host- keeps it to this origin.
const directCookiePrefix = "__Host-poppy-signin-"

func (si *signIn) directTool() tool {
	return newTool("sign_in_direct",
		"Sign the user in on the Company's own sign-in page in their browser: returns sign_in_url, a one-time link for the user "+
			"to open (or offers it to the client). Needs poppy-mcp in HTTP mode with a public URL; otherwise use sign_in_device. "+
			"Then call sign_in_status with wait_seconds.",
		annotations{title: "Sign in in the browser", openWorld: true},
		si.direct)
}

func (si *signIn) direct(ctx context.Context, req mcp.CallToolRequest, args signInArgs) *mcp.CallToolResult {
	domain := args.Domain
	start, done := si.begin(ctx, req, args, auth.KindDirect)
	if done != nil {
		return done
	}
	cs, sess, scopes := start.cs, start.sess, start.scopes
	redirect, ok := si.choice.redirectURI()
	if !ok || si.pages == nil {
		next := "Use sign_in_device with the same scopes (or sign_in_mediated), if the Company offers them."
		return failure(map[string]string{"error": "no_callback", "next": next},
			"Direct Sign-In needs poppy-mcp served over HTTP with --public-url, and %s listed in redirect_uris of agent.json. %s",
			strings.TrimSuffix(si.choice.publicURL, "/")+CallbackPath, next)
	}
	d, err := sess.StartDirect(redirect, scopes)
	if err != nil {
		return si.sessions.failure(ctx, domain, err)
	}
	f := auth.NewFlow(auth.KindDirect, domain, scopes, nil)
	f.Direct, f.Expires = d, d.Started.Add(directTTL)
	if err := si.openDirect(ctx, cs, f, d); err != nil {
		return failure(map[string]string{"error": "no_pages"}, "poppy-mcp could not open the sign-in page (%v). Try again.", err)
	}
	cs.Person().SignIns().StartPage(ctx, cs.Issuer(), f) // kept: its page and callback may reach another replica
	si.log.InfoContext(ctx, "direct sign-in started", "issuer", cs.Issuer(), "scopes", strings.Join(scopes, " "))
	if elicitsURL(ctx) {
		return si.elicitURL(ctx, cs, f, f.Page, "Sign in to "+whereTo(start.co, "")+" on its own page, to let your assistant use your account.")
	}
	return si.flowResult(cs, f, "")
}

// randomToken is 256 random bits, base64url.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// directState is what a Direct Sign-In keeps for its start page and for
// its callback, which may reach any replica. The start page's Binding is
// the cookie's value and the callback's Direct holds the PKCE code
// verifier: secrets, kept sealed (package pages), never in a result or log.
type directState struct {
	pageOwner
	Flow    string    `json:"flow"`   // the sign-in's ID
	Cookie  string    `json:"cookie"` // the name of the cookie that binds the browser
	Expires time.Time `json:"expires"`
	// The start page's: the Company's authorization URL and the cookie's value.
	URL     string `json:"url,omitempty"`
	Binding string `json:"binding,omitempty"`
	// The callback's: the cookie value's hash, the sign-in
	// (auth.DirectSignIn.MarshalKept) and the callbacks that could not be used.
	BindingHash string          `json:"binding_hash,omitempty"`
	Direct      json.RawMessage `json:"direct,omitempty"`
	Failed      int             `json:"failed,omitempty"`
}

// openDirect opens the start page of f, a Direct Sign-In of d, and keeps
// its callback under d's state, each for the person of cs; f's page is
// the start page's URL, and stopping f closes both.
func (si *signIn) openDirect(ctx context.Context, cs *agent.Company, f *auth.Flow, d *auth.DirectSignIn) error {
	kept, err := d.MarshalKept()
	if err != nil {
		return err
	}
	binding, key := randomToken(), mcpauth.KeyFrom(ctx)
	base := directState{pageOwner: pageOwner{Owner: agent.OwnerOf(cs.Person().User()), Domain: f.Domain}, Flow: f.ID,
		Cookie: directCookiePrefix + f.ID, Expires: f.Expires}
	cb, start := base, base
	cb.BindingHash, cb.Direct = bindingHash(binding), kept
	start.URL, start.Binding = d.URL, binding
	closeCallback, err := si.pages.Keep(ctx, key, kindDirectCallback, d.State, keptState(cb), directTTL, true)
	if err != nil {
		return err
	}
	page, closeStart, err := si.pages.OpenKindForUser(ctx, key, kindDirectStart, keptState(start), directTTL)
	if err != nil {
		closeCallback()
		return err
	}
	f.Page = page
	f.SetStop(func() { closeStart(); closeCallback() })
	return nil
}

// bindingHash is what the callback keeps of the binding cookie's value.
func bindingHash(binding string) string {
	h := sha256.Sum256([]byte("poppy-mcp direct sign-in binding\x00" + binding))
	return hex.EncodeToString(h[:])
}

// directStart is the one-time page the user opens, on any replica: it
// binds the browser to the sign-in with a cookie, then sends it to the
// Company's authorization URL.
func (si *signIn) directStart(w http.ResponseWriter, r *http.Request, p *pages.Page) {
	if r.Method != http.MethodGet {
		pages.Message(w, http.StatusMethodNotAllowed, "Not here", "Open this link; do not post to it.")
		return
	}
	var st directState
	ctx, end, ok := si.sessions.forPage(w, r, p, stateOwner(p, &st, &st.pageOwner))
	if !ok {
		return
	}
	defer end()
	if !p.Take(ctx) { // one use: a second open of the link is refused, on every replica
		pages.Gone(w)
		return
	}
	if f := si.pageFlow(ctx, st.Domain, st.Flow); f == nil || !f.Pending() {
		finishedPage(w)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: st.Cookie, Value: st.Binding, Path: "/", Secure: true, HttpOnly: true,
		MaxAge: int(st.Expires.Sub(si.now()) / time.Second),
		// Lax: the Company sends the browser back to the callback with a
		// top-level GET from its own site, which Strict would send bare.
		SameSite: http.SameSiteLaxMode,
	})
	// Poppy 0.1 §4.5: the agent "opens the authorization_endpoint in the User's browser"
	http.Redirect(w, r, st.URL, http.StatusSeeOther)
}

// bound reports whether r comes from the browser that opened the start page.
func (st *directState) bound(r *http.Request) bool {
	c, err := r.Cookie(st.Cookie)
	return err == nil && subtle.ConstantTimeCompare([]byte(bindingHash(c.Value)), []byte(st.BindingHash)) == 1
}

// callback takes the Company's redirect back (Poppy 0.1 §4.5 step 3), on
// any replica, in the browser that started the sign-in, which has taken
// the callback's record (p): it checks state and iss, and exchanges the
// code with this replica's Session. Only a successful exchange, the
// user's refusal (with the right state and iss) or a new Session end the
// sign-in; any other callback gives the record back for the real one, up
// to maxDirectCallbacks.
func (si *signIn) callback(ctx context.Context, w http.ResponseWriter, r *http.Request, p *pages.Page, st *directState) {
	f := si.pageFlow(ctx, st.Domain, st.Flow)
	if f == nil || !f.Pending() {
		finishedPage(w)
		return
	}
	reached, err := si.sessions.session(ctx, st.Domain, false)
	var d *auth.DirectSignIn
	if err == nil {
		d, err = auth.ParseKeptDirect(st.Direct)
	}
	if err != nil {
		_ = p.Keep(ctx, keptState(st))
		pages.Message(w, http.StatusServiceUnavailable, "Try again", "poppy-mcp could not reach the Company just now. Reload this page.")
		return
	}
	in, err := reached.sess.FinishDirect(ctx, d, r.URL.Query())
	if err != nil && !errors.Is(err, auth.ErrAccessDenied) && !errors.Is(err, auth.ErrAccountMismatch) && si.unused(ctx, w, p, st, f, err) {
		return
	}
	si.finish(ctx, reached.cs, reached.sess, f, in, err)
	f.StopPage()
	clearCookie(w, st.Cookie)
	switch state := f.State(); state.Status {
	case statusComplete:
		pages.Message(w, http.StatusOK, "Signed in", "You are signed in. You can close this page and return to your assistant.")
	case statusDenied:
		pages.Message(w, http.StatusOK, "Sign-in declined", "You declined the sign-in. Return to your assistant.")
	default:
		pages.Message(w, http.StatusBadRequest, "Sign-in failed", state.Detail+" Return to your assistant.")
	}
}

// unused counts a callback that could not be used and, below
// maxDirectCallbacks, gives the record back for the real one and answers
// the browser; it reports whether it did (false: the sign-in fails).
func (si *signIn) unused(ctx context.Context, w http.ResponseWriter, p *pages.Page, st *directState, f *auth.Flow, err error) bool {
	st.Failed++
	si.log.InfoContext(ctx, "direct sign-in: a callback could not be used", "err", err)
	if st.Failed >= maxDirectCallbacks {
		return false
	}
	f.Note("A return from the Company's page could not be used (" + callbackTrouble(err) + "); still waiting for the user.")
	if kerr := p.Keep(ctx, keptState(st)); kerr != nil {
		si.log.WarnContext(ctx, "direct sign-in: could not keep the callback", "err", kerr)
	}
	pages.Message(w, http.StatusBadRequest, "Sign-in not finished",
		"This return from the Company could not be used. If you are signing in, finish on the Company's page; otherwise return to your assistant.")
	return true
}

// callbackTrouble says, without Company text, why a callback was not used.
func callbackTrouble(err error) string {
	var ae *auth.Error
	if errors.As(err, &ae) {
		return "the Company answered " + ae.Code
	}
	return "it did not match this sign-in"
}

// clearCookie tells the browser to drop the cookie name.
func clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1, SameSite: http.SameSiteLaxMode})
}

// CallbackHandler serves the Direct Sign-In callback (Poppy 0.1 §4.5 step 3):
// mount it at Options.PublicURL's path + CallbackPath. It finds the sign-in by
// its state and hands the request to it; the user learns the outcome in the
// browser, the model from sign_in_status.
func (s *Server) CallbackHandler() http.Handler { return s.signIn.callbackHandler() }

// callbackHandler is CallbackHandler: it finds the sign-in's record by its
// state, on any replica (package pages keeps it), and takes it in the
// browser bound to it, one callback at a time.
func (si *signIn) callbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var p *pages.Page
		ok := false
		if state := r.URL.Query().Get("state"); state != "" && si.pages != nil {
			p, ok = si.pages.Find(r.Context(), kindDirectCallback, state)
		}
		if !ok {
			pages.Message(w, http.StatusBadRequest, "Sign-in not found", "This sign-in is unknown or has finished. Ask your assistant to start again.")
			return
		}
		var st directState
		owner := stateOwner(p, &st, &st.pageOwner)
		if !st.bound(r) {
			pages.Message(w, http.StatusForbidden, "Not this browser",
				"This sign-in was started in another browser. Open the sign-in link your assistant gave you in this browser, or ask for a new one.")
			return
		}
		ctx, end, ok := si.sessions.forPage(w, r, p, owner) // a browser that leaves does not stop the exchange
		if !ok {
			return
		}
		defer end()
		if !p.Take(ctx) { // another callback, here or on another replica, has it
			finishedPage(w)
			return
		}
		si.callback(ctx, w, r, p, &st)
	})
}
