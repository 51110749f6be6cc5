package tools

// This file is what the tools' local pages share (docs/tools.md "Local
// pages"): each is a page of a kind (package pages), whose state is kept
// in the store when poppy-mcp has one, so that whichever replica a load
// balancer sends the browser to serves it. The page's state says whom it
// was opened for; the replica that serves it does the page's work for
// that person, with its own Session of theirs (docs/architecture.md
// "Replicas").

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/pages"
)

// The kinds of the tools' pages.
const (
	kindMediated       = "sign-in/mediated" // sign_in_mediated's form
	kindDirectStart    = "sign-in/direct"   // sign_in_direct's link, which binds the browser
	kindDirectCallback = "sign-in/direct/callback"
	kindJoin           = "website/join" // open_website's and browse_page's join page
)

// servePages makes p serve the pages of the tools' kinds.
func (s *Server) servePages(p *pages.Server) {
	if p == nil {
		return
	}
	p.Handle(kindMediated, s.signIn.mediatedPage)
	p.Handle(kindDirectStart, s.signIn.directStart)
	p.Handle(kindJoin, s.web.joinPage)
}

// pageOwner is what every page's state says of whom it is for.
type pageOwner struct {
	// Owner is the person (agent.OwnerOf): the page's work is done for them.
	Owner string `json:"owner"`
	// Domain is the Company's domain the page was opened through.
	Domain string `json:"domain"`
}

// openState reads a page's state into v; false when it cannot be read.
func openState(p *pages.Page, v any) bool { return json.Unmarshal(p.State, v) == nil }

// stateOwner reads a page's state into v, whose pageOwner o is, and
// returns whom the page is for: nobody forPage accepts when it cannot be
// read.
func stateOwner(p *pages.Page, v any, o *pageOwner) pageOwner {
	if !openState(p, v) {
		return pageOwner{Owner: "\x00unreadable"}
	}
	return *o
}

// keptState is v as a page keeps it.
func keptState(v any) []byte {
	b, _ := json.Marshal(v) // the states are plain structs
	return b
}

// forPage returns the request's context acting for the person a page of
// theirs was opened for, checked against the person the page says it is
// for (pages.Page.Owner), and a function that ends holding them on this
// replica (people.hold: they are not forgotten meanwhile). ok is false,
// and w answered, when the two disagree: the page is not served.
func (ss *sessions) forPage(w http.ResponseWriter, r *http.Request, p *pages.Page, o pageOwner) (ctx context.Context, end func(), ok bool) {
	ctx, ok = agent.ForOwner(context.WithoutCancel(r.Context()), p.Owner, o.Owner) // a browser that leaves stops nothing
	if !ok {
		refusePage(w)
		return nil, nil, false
	}
	person, _ := mcpauth.UserFrom(ctx)
	return ctx, ss.people.hold(person), true
}

// refusePage answers a page whose state does not say whom it is for.
func refusePage(w http.ResponseWriter) {
	pages.Message(w, http.StatusForbidden, "Not available", "This page cannot be opened. Ask your assistant for a new link.")
}
