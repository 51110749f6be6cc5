package auth

// This file is one sign-in as a Personal Agent follows it (Poppy 0.1
// §4.4-4.7): under way until the user finishes it or it ends, then
// complete, denied, expired or failed. SignIns (signins.go) keeps each
// person's latest at each Company.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Sign-in statuses, as sign_in_status reports them (docs/tools.md
// "Sign-in statuses") and DeviceFlow keeps them.
const (
	FlowPending  = "pending"
	FlowComplete = "complete"
	FlowDenied   = "denied"
	FlowExpired  = "expired"
	FlowFailed   = "failed"
)

// Flow is one sign-in of a person at a Company. The fields are set before
// it is shared and not changed after; its state changes under its own
// lock. It is safe for concurrent use.
type Flow struct {
	ID      string // opaque: the MCP requestState and elicitationId
	Kind    Kind
	Domain  string // the Company's domain the sign-in was started through
	Scopes  []string
	Expires time.Time
	Device  *DeviceAuthorization // Device Sign-In: what the User needs
	Direct  *DirectSignIn        // Direct Sign-In: the URL and what the callback needs
	Page    string               // Direct and Mediated Sign-In: the local page's URL

	stop func()        // stops the flow: polling or the page
	done chan struct{} // closed when the status leaves pending

	// mu guards everything below.
	mu     sync.Mutex
	status string
	state  FlowState
}

// FlowState is where a sign-in stands.
type FlowState struct {
	Status  string   // FlowPending, FlowComplete, FlowDenied, FlowExpired or FlowFailed
	Granted []string // the scopes granted, once complete
	Missing []string // the scopes asked for and not granted
	// Detail says why it did not complete, or what it waits on, for the
	// model: never a secret.
	Detail string
}

// NewFlow returns a pending sign-in of kind through domain for scopes,
// with a new ID; stop (nil: nothing) stops its polling or its page when it
// ends before finishing.
func NewFlow(kind Kind, domain string, scopes []string, stop func()) *Flow {
	b := make([]byte, 12)
	rand.Read(b)
	if stop == nil {
		stop = func() {}
	}
	return &Flow{ID: string(kind) + "_" + base64.RawURLEncoding.EncodeToString(b), Kind: kind, Domain: domain,
		Scopes: slices.Clone(scopes), status: FlowPending, done: make(chan struct{}), stop: stop}
}

// SetStop replaces what stops the flow; it is called before the flow is
// shared.
func (f *Flow) SetStop(stop func()) { f.stop = stop }

// State returns where the sign-in stands.
func (f *Flow) State() FlowState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.state
	s.Status, s.Granted, s.Missing = f.status, slices.Clone(s.Granted), slices.Clone(s.Missing)
	return s
}

// Pending reports whether the sign-in waits on the user.
func (f *Flow) Pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status == FlowPending
}

// Done is closed once the sign-in leaves pending.
func (f *Flow) Done() <-chan struct{} { return f.done }

// End moves a pending sign-in to status; it reports false when it had
// ended already.
func (f *Flow) End(status string, granted, missing []string, detail string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status != FlowPending {
		return false
	}
	f.status, f.state = status, FlowState{Granted: granted, Missing: missing, Detail: detail}
	close(f.done)
	return true
}

// Note sets what the model should hear about a sign-in still pending.
func (f *Flow) Note(detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status == FlowPending {
		f.state.Detail = detail
	}
}

// Stop ends a pending sign-in as failed with detail and stops its polling
// or page; it reports false when it had ended already.
func (f *Flow) Stop(detail string) bool {
	if !f.End(FlowFailed, nil, nil, detail) {
		return false
	}
	f.stop()
	return true
}

// StopPage stops the flow's polling or page, whatever its status.
func (f *Flow) StopPage() { f.stop() }

// Expire ends a pending sign-in whose time has passed at now; it reports
// whether it did.
func (f *Flow) Expire(now time.Time) bool {
	if f.Expires.IsZero() || now.Before(f.Expires) || !f.End(FlowExpired, nil, nil, "The sign-in expired before the user finished it.") {
		return false
	}
	f.stop()
	return true
}

// FlowFailure is the status and the sentence for the model of a sign-in
// that ended with err.
func FlowFailure(err error) (status, detail string) {
	var ae *Error
	switch {
	case errors.Is(err, ErrAccessDenied):
		return FlowDenied, "The user declined the sign-in."
	case errors.Is(err, ErrExpiredToken):
		return FlowExpired, "The sign-in expired before the user finished it."
	case errors.Is(err, ErrAccountMismatch):
		// Poppy 0.1 §4.4: "A Session is signed in to at most one account."
		return FlowFailed, "The Session had been signed in to another account, so poppy-mcp started a new Session: start the sign-in again."
	case errors.Is(err, context.Canceled):
		return FlowFailed, "The sign-in was stopped (poppy-mcp is shutting down or a newer sign-in replaced it)."
	case errors.As(err, &ae):
		return FlowFailed, "The Company refused the sign-in: " + untrusted.Quote(ae.Code, 300) + "."
	}
	return FlowFailed, "The sign-in failed: " + err.Error()
}
