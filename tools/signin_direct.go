package tools

// This file serves sign_in_direct: Direct Sign-In (Poppy 0.1 §4.5), the
// authorization code flow with PKCE, and the callback the Company sends the
// user's browser back to. The callback is served by poppy-mcp in HTTP mode
// at Deps.PublicURL + CallbackPath, which must be one of the redirect_uris
// the agent publishes (§4.1); without one, the tool says to use Device
// Sign-In.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/pages"
)

// CallbackPath is where Direct Sign-In returns under Deps.PublicURL; mount
// CallbackHandler there.
const CallbackPath = "/oauth/callback"

// directTTL is how long poppy-mcp waits for the user to come back.
const directTTL = 10 * time.Minute

func init() {
	toolsets = append(toolsets, func(s *Server) []tool { return []tool{s.signInDirectTool()} })
}

func (s *Server) signInDirectTool() tool {
	return tool{newTool("sign_in_direct",
		"Sign the user in on the Company's own sign-in page in their browser: returns authorization_url for the user to open "+
			"(or offers it to the client). Needs poppy-mcp in HTTP mode with a public URL; otherwise use sign_in_device. "+
			"Then call sign_in_status with wait_seconds.",
		`{"type":"object","properties":{`+
			`"domain":{"type":"string","description":"The Company's domain, e.g. example.com"},`+scopesSchema+`},`+
			`"required":["domain","scopes"],"additionalProperties":false}`,
		annotations{title: "Sign in in the browser", openWorld: true},
	), s.signInDirect}
}

// redirectURI is the callback URL, when poppy-mcp can receive it.
func (s *Server) redirectURI() (string, bool) {
	if s.deps.PublicURL == "" || s.deps.Agent == nil {
		return "", false
	}
	u := strings.TrimSuffix(s.deps.PublicURL, "/") + CallbackPath
	// Poppy 0.1 §4.5: "redirect_uri MUST exactly match an entry in the Personal Agent's redirect_uris (4.1)."
	return u, slices.Contains(s.deps.Agent.Identity().Metadata().RedirectURIs, u)
}

func (s *Server) signInDirect(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	domain := stringArg(req, "domain")
	rt, sess, scopes, done := s.beginSignIn(ctx, req, "direct", "sign_in_direct")
	if done != nil {
		return done, nil
	}
	redirect, ok := s.redirectURI()
	if !ok {
		next := "Use sign_in_device with the same scopes (or sign_in_mediated), if the Company offers them."
		return failure(map[string]string{"error": "no_callback", "next": next},
			"Direct Sign-In needs poppy-mcp served over HTTP with --public-url, and %s listed in redirect_uris of agent.json. %s",
			strings.TrimSuffix(s.deps.PublicURL, "/")+CallbackPath, next), nil
	}
	d, err := sess.StartDirect(redirect, scopes)
	if err != nil {
		return s.sessionFailure(domain, err), nil
	}
	f := newFlow("direct", domain, scopes)
	f.direct, f.expires = d, d.Started.Add(directTTL)
	var claimed atomic.Bool
	f.callback = func(ctx context.Context, q url.Values) {
		if !claimed.CompareAndSwap(false, true) {
			return // a code is exchanged once
		}
		in, err := sess.FinishDirect(ctx, d, q)
		s.finishFlow(ctx, rt, sess, f, in, err)
	}
	rt.replaceFlow(f)
	s.log.Info("direct sign-in started", "issuer", rt.issuer, "scopes", strings.Join(scopes, " "))
	if elicitsURL(ctx) {
		return elicitURL(f, d.URL, fmt.Sprintf("Sign in to %s on its own page to let your assistant use your account.", orgName(rt.Company()))), nil
	}
	return s.flowResult(rt, f, ""), nil
}

// CallbackHandler serves the Direct Sign-In callback (Poppy 0.1 §4.5 step 3):
// mount it at Deps.PublicURL's path + CallbackPath. It finds the sign-in by
// its state, checks state and iss, exchanges the code, and tells the user
// in the browser; the model learns the outcome from sign_in_status.
func (s *Server) CallbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		f := s.directFlow(q.Get("state"))
		if f == nil {
			pages.Message(w, http.StatusBadRequest, "Sign-in not found", "This sign-in is unknown or has finished. Ask your assistant to start again.")
			return
		}
		f.callback(context.WithoutCancel(r.Context()), q)
		status, _, _, detail := f.state()
		switch status {
		case statusComplete:
			pages.Message(w, http.StatusOK, "Signed in", "You are signed in. You can close this page and return to your assistant.")
		case statusDenied:
			pages.Message(w, http.StatusOK, "Sign-in declined", "You declined the sign-in. Return to your assistant.")
		default:
			pages.Message(w, http.StatusBadRequest, "Sign-in failed", detail+" Return to your assistant.")
		}
	})
}

// directFlow returns the pending Direct Sign-In with state, or nil.
func (s *Server) directFlow(state string) *signInFlow {
	if state == "" {
		return nil
	}
	s.mu.Lock()
	rts := make([]*runtime, 0, len(s.runtimes))
	for _, rt := range s.runtimes {
		rts = append(rts, rt)
	}
	s.mu.Unlock()
	for _, rt := range rts {
		if f := rt.currentFlow(); f != nil && f.direct != nil && f.direct.State == state && isPending(f) {
			return f
		}
	}
	return nil
}
