package poppytest

// This file shows a test harness what only a person at the Company would
// see: the device sign-ins waiting on the verification page (never their
// device codes), the Direct Sign-Ins waiting on the consent page, the
// one-time codes the Company "sent". poppytest serve's admin API reads them,
// with the recorder's counters (errors.go). Each is a method of the sign-in
// flow it shows.

import (
	"slices"
	"strings"
	"time"
)

// DeviceRequest is a Device Sign-In (Poppy 0.1 §4.6) as its verification
// page knows it: its user code, never its device code.
type DeviceRequest struct {
	UserCode string   `json:"user_code"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
	Status   string   `json:"status"`            // "pending", "approved", "denied" or "expired"
	Account  string   `json:"account,omitempty"` // approved for
	// Final says the Company gave the agent's polls their last answer:
	// tokens for an approved request, access_denied or expired_token.
	Final   bool      `json:"final"`
	Created time.Time `json:"created_at"`
	Expires time.Time `json:"expires_at"`
}

// DeviceRequests returns every device sign-in, oldest first.
func (s *deviceFlow) DeviceRequests() []DeviceRequest {
	now := s.timeNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DeviceRequest, 0, len(s.devices))
	for _, d := range s.devices {
		r := DeviceRequest{UserCode: d.userCode, ClientID: d.client.id, Scopes: slices.Clone(d.scopes),
			Account: d.account, Final: d.final, Created: d.created, Expires: d.expires}
		switch {
		case d.status == deviceApproved:
			r.Status = "approved"
		case d.status == deviceDenied:
			r.Status = "denied"
		case !now.Before(d.expires):
			r.Status = "expired"
		default:
			r.Status = "pending"
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b DeviceRequest) int { return a.Created.Compare(b.Created) })
	return out
}

// AuthorizationRequest is a Direct Sign-In (Poppy 0.1 §4.5) waiting for
// the User on the consent page.
type AuthorizationRequest struct {
	State       string   `json:"state"`
	ClientID    string   `json:"client_id"`
	RedirectURI string   `json:"redirect_uri"`
	Scopes      []string `json:"scopes"`
}

// AuthorizationRequests returns the Direct Sign-Ins waiting for the User,
// by state, for ApproveAuthorization and DenyAuthorization.
func (s *directFlow) AuthorizationRequests() []AuthorizationRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []AuthorizationRequest{}
	for _, ar := range s.authRequests {
		if !ar.done {
			out = append(out, AuthorizationRequest{State: ar.state, ClientID: ar.client.id, RedirectURI: ar.redirectURI, Scopes: slices.Clone(ar.scopes)})
		}
	}
	slices.SortFunc(out, func(a, b AuthorizationRequest) int { return strings.Compare(a.State, b.State) })
	return out
}

// SentCode is a one-time code the Company sent for a Mediated Sign-In
// (Poppy 0.1 §4.7), as the User reads it from their phone.
type SentCode struct {
	SignInID string    `json:"sign_in_id"`
	Account  string    `json:"account"`
	SentTo   string    `json:"sent_to"`
	Code     string    `json:"code"`
	Sent     time.Time `json:"sent_at"`
	Expires  time.Time `json:"expires_at"`
	Finished bool      `json:"finished"` // completed, failed or expired
}

// SentCodes returns every one-time code sent, oldest first.
func (s *mediatedFlow) SentCodes() []SentCode {
	now := s.timeNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SentCode, 0, len(s.signIns))
	for id, si := range s.signIns {
		out = append(out, SentCode{SignInID: id, Account: si.account, SentTo: si.sentTo, Code: si.code,
			Sent: si.expires.Add(-signInLife), Expires: si.expires, Finished: si.finished || !now.Before(si.expires)})
	}
	slices.SortFunc(out, func(a, b SentCode) int { return a.Expires.Compare(b.Expires) })
	return out
}
