package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// signInNeededResult is the structured content of a result that asks for a
// sign-in. It never holds a token.
type signInNeededResult struct {
	Error  string   `json:"error"`  // sign_in_required or insufficient_scope
	Domain string   `json:"domain"` // as the model gave it
	Scopes []string `json:"scopes"` // the scopes to ask for
	Tool   string   `json:"tool"`   // the sign-in tool to call next; "" when none offers them
	// Notice says why a Session that was signed in is not any more, when
	// poppy-mcp found out itself (the Account Token was refused, ...).
	Notice string `json:"notice,omitempty"`
	Next   string `json:"next"`
}

// signInNeeded turns an error of sign-in kind from any Company request
// (auth.ErrSignInRequired, auth.ErrInsufficientScope) into a result that
// names the scopes needed and the sign-in tool to call next, choosing a
// sign-in type the Company offers with those scopes (Poppy 0.1 §4.4: "the
// User signs in again, through a type that allows the required scopes"). It
// reports false for any other error. Tools call it before phrasing an error
// themselves:
//
//	if r, ok := si.needed(ctx, domain, err); ok {
//		return r
//	}
func (si *signIn) needed(ctx context.Context, domain string, err error) (*mcp.CallToolResult, bool) {
	var ae *auth.Error
	if !errors.As(err, &ae) || !ae.Is(auth.ErrSignInRequired) && !ae.Is(auth.ErrInsufficientScope) {
		return nil, false
	}
	scopes := strings.Fields(ae.Scope)
	if len(scopes) == 0 {
		// sign_in_required need not name a scope; reading the account is the least a task needs.
		scopes = []string{"poppy:read"}
	}
	return si.advice(ctx, domain, ae.Code, scopes), true
}

// signInAdvice is the result that tells the model how to get scopes.
func (si *signIn) advice(ctx context.Context, domain, code string, scopes []string) *mcp.CallToolResult {
	res := signInNeededResult{Error: code, Domain: domain, Scopes: scopes}
	a := si.companies.knownAuth(domain)
	res.Tool = si.choice.tool(a, scopes)
	list := companyWord(strings.Join(scopes, " ")) // the scopes the Company named
	switch {
	case si.noTools:
		res.Tool = ""
		res.Next = fmt.Sprintf("This needs a sign-in to %s granting %s, but this poppy-mcp serves no sign-in tools (--toolsets without signin): "+
			"tell the user.", domain, list)
	case res.Tool == "" && pickSignIn(a, scopes, true) == toolOf(auth.KindDirect):
		res.Next = fmt.Sprintf("Only Direct Sign-In of %s grants %s, and this poppy-mcp cannot take its callback (that needs poppy-mcp served "+
			"over HTTP with --public-url, the callback in agent.json's redirect_uris): tell the user.", domain, list)
	case res.Tool == "":
		res.Next = fmt.Sprintf("No sign-in type of %s grants %s: tell the user this task needs account access the Company does not offer to agents.", domain, list)
	default:
		res.Next = fmt.Sprintf("Call %s with domain %s and the scopes of %s, then call this tool again.", res.Tool, domain, list)
	}
	if cs := si.sessions.known(ctx, domain); cs != nil {
		res.Notice = takeNotice(cs) // why a Session that was signed in is not any more
	}
	si.log.InfoContext(ctx, "sign-in needed", "domain", domain, "code", code, "scopes", list)
	if res.Notice != "" {
		return failure(res, "%s: %s %s", code, res.Notice, res.Next)
	}
	return failure(res, "%s: %s", code, res.Next)
}

// signInChoice chooses the sign-in tool to advise, which depends on
// whether this poppy-mcp can take Direct Sign-In's callback.
type signInChoice struct {
	publicURL string      // Options.PublicURL
	agent     *auth.Agent // nil: no identity, so no callback either
}

// tool picks the sign-in tool for scopes: Device Sign-In first (it needs no
// callback and no credentials), then Direct when poppy-mcp can receive its
// callback (--public-url, and the callback in agent.json's redirect_uris),
// then Mediated. With nothing known of the Company it suggests
// sign_in_device.
func (c signInChoice) tool(a *discovery.Auth, scopes []string) string {
	_, direct := c.redirectURI()
	return pickSignIn(a, scopes, direct)
}

// redirectURI is the callback URL, and whether poppy-mcp can receive it:
// it serves it and publishes it in redirect_uris.
func (c signInChoice) redirectURI() (string, bool) {
	if c.publicURL == "" || c.agent == nil {
		return "", false
	}
	u := strings.TrimSuffix(c.publicURL, "/") + CallbackPath
	// Poppy 0.1 §4.5: "redirect_uri MUST exactly match an entry in the Personal Agent's redirect_uris (4.1)."
	return u, slices.Contains(c.agent.Identity().Metadata().RedirectURIs, u)
}

// pickSignIn is signInTool's choice, the first kind in auth.Kinds' order
// that can run here and grants scopes; direct says whether a kind that
// needs a callback (Direct Sign-In) can run here.
func pickSignIn(a *discovery.Auth, scopes []string, direct bool) string {
	if a == nil {
		return toolOf(auth.KindDevice)
	}
	for _, k := range auth.Kinds() {
		if list, ok := k.Offer(a); ok && (direct || !k.Callback) && covers(list, scopes) {
			return toolOf(k.Kind)
		}
	}
	return ""
}
