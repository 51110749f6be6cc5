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
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
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
	ds := &directSignIn{si: si, cs: cs, sess: sess, f: f, d: d, binding: randomToken()}
	f.Direct, f.Expires, f.Callback = d, d.Started.Add(directTTL), ds.callback
	page, closePage := si.pages.OpenForUser(mcpauth.KeyFrom(ctx), ds.start, directTTL)
	f.Page = page
	f.SetStop(closePage)
	si.replace(cs, f)
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

// directSignIn is one Direct Sign-In's browser side. It is safe for
// concurrent use: callbacks are taken one at a time.
type directSignIn struct {
	si      *signIn
	cs      *agent.Company
	sess    *auth.Session
	f       *auth.Flow
	d       *auth.DirectSignIn
	binding string // the cookie's value: a secret, never in a result or log

	// mu is held while a callback is handled; it guards failed.
	mu     sync.Mutex
	failed int // callbacks that could not be used
}

// cookieName is the name of this sign-in's cookie.
func (ds *directSignIn) cookieName() string { return directCookiePrefix + ds.f.ID }

// start is the one-time page the user opens: it binds the browser to this
// sign-in with a cookie, then sends it to the Company's authorization URL.
func (ds *directSignIn) start(w http.ResponseWriter, r *http.Request, done func()) {
	if r.Method != http.MethodGet {
		pages.Message(w, http.StatusMethodNotAllowed, "Not here", "Open this link; do not post to it.")
		return
	}
	done() // one use: a second open of the link is refused
	if !ds.f.Pending() {
		pages.Message(w, http.StatusGone, "Sign-in finished", "This sign-in has finished. Return to your assistant.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: ds.cookieName(), Value: ds.binding, Path: "/", Secure: true, HttpOnly: true,
		MaxAge: int(ds.f.Expires.Sub(ds.si.now()) / time.Second),
		// Lax: the Company sends the browser back to the callback with a
		// top-level GET from its own site, which Strict would send bare.
		SameSite: http.SameSiteLaxMode,
	})
	// Poppy 0.1 §4.5: the agent "opens the authorization_endpoint in the User's browser"
	http.Redirect(w, r, ds.d.URL, http.StatusSeeOther)
}

// bound reports whether r comes from the browser that opened the start page.
func (ds *directSignIn) bound(r *http.Request) bool {
	c, err := r.Cookie(ds.cookieName())
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(ds.binding)) == 1
}

// callback takes the Company's redirect back (Poppy 0.1 §4.5 step 3) in the
// browser that started the sign-in: it checks state and iss, and exchanges
// the code. Only a successful exchange, the user's refusal (with the right
// state and iss) or a new Session end the sign-in; any other callback leaves
// it pending for the real one, up to maxDirectCallbacks.
func (ds *directSignIn) callback(w http.ResponseWriter, r *http.Request) {
	if !ds.bound(r) {
		pages.Message(w, http.StatusForbidden, "Not this browser",
			"This sign-in was started in another browser. Open the sign-in link your assistant gave you in this browser, or ask for a new one.")
		return
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if !ds.f.Pending() {
		pages.Message(w, http.StatusGone, "Sign-in finished", "This sign-in has finished. Return to your assistant.")
		return
	}
	ctx := ds.cs.Person().WithPerson(context.WithoutCancel(r.Context())) // a browser that leaves does not stop the exchange
	in, err := ds.sess.FinishDirect(ctx, ds.d, r.URL.Query())
	if err != nil && !errors.Is(err, auth.ErrAccessDenied) && !errors.Is(err, auth.ErrAccountMismatch) {
		ds.failed++
		ds.si.log.InfoContext(ctx, "direct sign-in: a callback could not be used", "issuer", ds.cs.Issuer(), "err", err)
		if ds.failed < maxDirectCallbacks {
			ds.f.Note("A return from the Company's page could not be used (" + callbackTrouble(err) + "); still waiting for the user.")
			pages.Message(w, http.StatusBadRequest, "Sign-in not finished",
				"This return from the Company could not be used. If you are signing in, finish on the Company's page; otherwise return to your assistant.")
			return
		}
	}
	ds.si.finish(ctx, ds.cs, ds.sess, ds.f, in, err)
	ds.f.StopPage()
	st := ds.f.State()
	status, detail := st.Status, st.Detail
	clearCookie(w, ds.cookieName())
	switch status {
	case statusComplete:
		pages.Message(w, http.StatusOK, "Signed in", "You are signed in. You can close this page and return to your assistant.")
	case statusDenied:
		pages.Message(w, http.StatusOK, "Sign-in declined", "You declined the sign-in. Return to your assistant.")
	default:
		pages.Message(w, http.StatusBadRequest, "Sign-in failed", detail+" Return to your assistant.")
	}
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

// callbackHandler is CallbackHandler.
func (si *signIn) callbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		f := si.directFlow(r.URL.Query().Get("state"))
		if f == nil {
			pages.Message(w, http.StatusBadRequest, "Sign-in not found", "This sign-in is unknown or has finished. Ask your assistant to start again.")
			return
		}
		f.Callback(w, r)
	})
}

// directFlow returns the pending Direct Sign-In with state, or nil.
func (si *signIn) directFlow(state string) *auth.Flow {
	if state == "" {
		return nil
	}
	for _, p := range si.sessions.people.all() {
		for _, cs := range p.Companies() {
			f := si.current(cs)
			if f != nil && f.Direct != nil && f.Pending() && subtle.ConstantTimeCompare([]byte(f.Direct.State), []byte(state)) == 1 {
				return f
			}
		}
	}
	return nil
}
