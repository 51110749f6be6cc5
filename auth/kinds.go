package auth

// This file is the one table of sign-in kinds (Poppy 0.1 §4.4-4.7): what
// each needs from the Company's poppy.json and from the Personal Agent,
// and how it starts. The MCP layer keeps its half (which tool offers each
// kind) in a table of its own; nothing else switches on a kind.

import "github.com/poppy-mcp/poppy-mcp/discovery"

// Kind is a sign-in type (Poppy 0.1 §4.4): device, direct or mediated.
type Kind string

// The sign-in kinds.
const (
	KindDevice   Kind = "device"   // Device Sign-In, §4.6
	KindDirect   Kind = "direct"   // Direct Sign-In, §4.5
	KindMediated Kind = "mediated" // Mediated Sign-In, §4.7
)

// KindSpec is what one sign-in kind needs and how it starts.
type KindSpec struct {
	Kind    Kind
	Name    string // as the spec names it: "Device Sign-In"
	Section string // the spec section that defines it: "4.6"
	// Offer returns the scopes the kind can grant at the Company whose
	// poppy.json auth is a, and whether the Company offers it. Poppy 0.1
	// §4.4: "Each type lists the scopes it can grant".
	Offer func(a *discovery.Auth) (scopes []string, ok bool)
	// Callback: the kind needs a redirect URI the Personal Agent serves
	// and lists in its redirect_uris (§4.5).
	Callback bool
	// Page: the user opens a local page of the Personal Agent (Direct:
	// the page that binds the browser; Mediated: the credentials form).
	Page bool
	// Polls: the Personal Agent polls the Company in the background until
	// the user finishes (§4.6), so the sign-in is kept in the store and
	// can be taken over by another replica (SignIns.StartDevice).
	Polls bool
	// Starts says how the sign-in starts, for docs and logs.
	Starts string
}

// kindTable is every sign-in kind, in the order a Personal Agent suggests
// them: Device first (it needs no callback and no credentials), then
// Direct, then Mediated. It is built on each call: the package keeps no
// state.
func kindTable() []KindSpec {
	return []KindSpec{
		{Kind: KindDevice, Name: "Device Sign-In", Section: "4.6", Polls: true,
			Offer:  func(a *discovery.Auth) ([]string, bool) { return typeScopes(a.Device) },
			Starts: "Session.StartDevice, then SignIns.StartDevice polls it"},
		{Kind: KindDirect, Name: "Direct Sign-In", Section: "4.5", Callback: true, Page: true,
			Offer:  func(a *discovery.Auth) ([]string, bool) { return typeScopes(a.Direct) },
			Starts: "Session.StartDirect; the callback finishes it (Session.FinishDirect)"},
		{Kind: KindMediated, Name: "Mediated Sign-In", Section: "4.7", Page: true,
			Offer:  mediatedScopes,
			Starts: "Site.SignInMediated with the fields the user typed, then Session.SubmitCode"},
	}
}

func typeScopes(t *discovery.SignInType) ([]string, bool) {
	if t == nil {
		return nil, false
	}
	return t.Scopes, true
}

func mediatedScopes(a *discovery.Auth) ([]string, bool) {
	if a.Mediated == nil {
		return nil, false
	}
	return a.Mediated.Scopes, true
}

// Kinds returns every sign-in kind, in the order a Personal Agent
// suggests them.
func Kinds() []KindSpec { return kindTable() }

// Spec returns the kind's row of the table, and whether it is a kind.
func (k Kind) Spec() (KindSpec, bool) {
	for _, s := range kindTable() {
		if s.Kind == k {
			return s, true
		}
	}
	return KindSpec{}, false
}

// Offered returns the scopes the kind can grant at the Company whose
// poppy.json auth is a, and whether the Company offers the kind; a nil a
// offers nothing.
func (k Kind) Offered(a *discovery.Auth) ([]string, bool) {
	s, ok := k.Spec()
	if !ok || a == nil {
		return nil, false
	}
	return s.Offer(a)
}

// polls reports whether sign-ins of the kind are polled, and so kept in
// the store for any replica (KindSpec.Polls).
func (k Kind) polls() bool {
	s, _ := k.Spec()
	return s.Polls
}
