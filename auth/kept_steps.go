package auth

// This file keeps a step of a sign-in that a page continues, so that the
// request that continues it may come to another replica (package pages
// keeps the bytes sealed in the store): a Mediated Sign-In waiting for its
// one-time code (Poppy 0.1 §4.7), and a Direct Sign-In waiting for its
// callback (§4.5). Neither holds a credential or a code; the Direct
// Sign-In's bytes hold its PKCE code verifier, a secret, so they are
// never logged and only kept sealed.

import (
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// keptCode is a MediatedStep waiting for its code, as kept.
type keptCode struct {
	SignInID  string    `json:"sign_in_id"`
	SentTo    string    `json:"sent_to"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Scopes    []string  `json:"scopes"`
	Endpoint  string    `json:"endpoint"`
}

// MarshalKept returns what ParseKeptStep needs to continue st, a step
// waiting for its one-time code (MediatedCodeRequired), on any replica.
func (st *MediatedStep) MarshalKept() ([]byte, error) {
	if st == nil || st.Status != MediatedCodeRequired {
		return nil, errors.New("auth: only a mediated sign-in waiting for its code is kept")
	}
	return json.Marshal(keptCode{SignInID: st.signInID, SentTo: st.SentTo, ExpiresAt: st.ExpiresAt, Scopes: st.scopes, Endpoint: st.endpoint})
}

// ParseKeptStep returns the step MarshalKept kept, for SubmitCode.
func ParseKeptStep(b []byte) (*MediatedStep, error) {
	var k keptCode
	if err := json.Unmarshal(b, &k); err != nil || k.SignInID == "" || k.Endpoint == "" {
		return nil, errors.New("auth: the kept mediated sign-in step is unreadable")
	}
	return &MediatedStep{Status: MediatedCodeRequired, SentTo: k.SentTo, ExpiresAt: k.ExpiresAt, signInID: k.SignInID,
		scopes: slices.Clone(k.Scopes), endpoint: k.Endpoint}, nil
}

// keptDirect is a DirectSignIn, as kept.
type keptDirect struct {
	URL         string    `json:"url"`
	State       string    `json:"state"`
	RedirectURI string    `json:"redirect_uri"`
	Scopes      []string  `json:"scopes"`
	Started     time.Time `json:"started"`
	Verifier    string    `json:"verifier"`
}

// MarshalKept returns what ParseKeptDirect needs to finish d on any
// replica, its code verifier included: keep it sealed, never log it.
func (d *DirectSignIn) MarshalKept() ([]byte, error) {
	return json.Marshal(keptDirect{URL: d.URL, State: d.State, RedirectURI: d.RedirectURI, Scopes: d.Scopes, Started: d.Started,
		Verifier: d.verifier.Reveal()})
}

// ParseKeptDirect returns the Direct Sign-In MarshalKept kept, for
// Session.FinishDirect.
func ParseKeptDirect(b []byte) (*DirectSignIn, error) {
	var k keptDirect
	if err := json.Unmarshal(b, &k); err != nil || k.State == "" || k.Verifier == "" || k.RedirectURI == "" {
		return nil, errors.New("auth: the kept Direct Sign-In is unreadable")
	}
	return &DirectSignIn{URL: k.URL, State: k.State, RedirectURI: k.RedirectURI, Scopes: slices.Clone(k.Scopes), Started: k.Started,
		verifier: NewSecret(k.Verifier)}, nil
}
