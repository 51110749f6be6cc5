package poppytest

// This file builds the Server's concerns. The Server is split by concern
// (docs/poppytest.md "How the Server is put together"): each concern is a
// type with its own files, holding its own state and the methods that use
// it, and the Server embeds it, so that its exported methods are the
// Server's. Each concern embeds the *Server in turn: through it, it reaches
// the core every concern shares (the T, the options, the clock, the lock)
// and the other concerns, by the same names as before the split.
//
// Locks: a concern's fields are guarded by the Server's mu unless its type
// has a mu of its own (convState, shop, mcpState, webState). In the methods
// of those, s.mu is the concern's own lock and s.Server.mu the Server's.

import (
	"net/http"
	"time"
)

// newConcerns makes every concern of s, empty; the install methods fill
// those that need the options (NewUnstartedServer calls them).
func (s *Server) newConcerns() {
	s.lifecycle = &lifecycle{Server: s}
	s.router = &router{Server: s, handlers: map[string]map[string]http.Handler{}, muxes: map[string]*http.ServeMux{}}
	s.documents = &documents{Server: s, docs: map[string]*document{}}
	s.recorder = &recorder{Server: s, secretSet: map[string]struct{}{}, arriving: map[*http.Request]int{}, served: map[string]int{}}
	s.sessionTokens = &sessionTokens{Server: s, grants: map[string]grantFunc{}, sessions: map[string]*Session{}, tokens: map[string]*token{},
		clientAuth:   &clientAuth{Server: s, clients: map[string]*client{}, jtis: map[string]time.Time{}},
		dpopProofs:   &dpopProofs{Server: s, nonces: map[string]string{}},
		resourceAuth: &resourceAuth{Server: s, usedSeq: map[string]uint64{}}}
	s.signInState = &signInState{Server: s} // filled in by installSignIn
	s.mcpState = &mcpState{Server: s}       // filled in by installMCPServer
	s.webState = &webState{Server: s}       // filled in by installWeb
	s.storeAPI = &storeAPI{Server: s}
	s.convState = &convState{Server: s, companyAgent: &companyAgent{s}, eventStreams: &eventStreams{s}} // filled in by installConversations
	// shop is made by installConversations, with the fixture's dates.
	s.faults = &faults{Server: s, limits: map[string]*rateLimit{}, extension: map[string]string{}, slow: map[string]time.Duration{}}
}
