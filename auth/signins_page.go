package auth

// This file is the half of SignIns for the sign-ins a person finishes on a
// page (Direct, §4.5, and Mediated, §4.7): the page is kept in the store
// (package pages), so whichever replica a load balancer sends the browser
// to takes the credentials or the callback and finishes the sign-in there,
// with that replica's Session of the person. The sign-in itself is kept
// too (as PageFlow: never a credential, a code or a token), so that the
// replica the model waits on, which started it, learns how it ended: the
// outcome is saved and announced on SignInChannel, and that replica signs
// its own Session in with the Account Token the other one stored.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// pageFlowPrefix names the kept page sign-ins: one per Company (by
// issuer), the latest, in each person's view of the store.
const pageFlowPrefix = "signin/page/"

// PageFlow is a Direct or Mediated sign-in as the store keeps it: what
// every replica needs to report it and to finish it. It holds no secret.
type PageFlow struct {
	ID      string    `json:"id"`
	Kind    Kind      `json:"kind"`
	Issuer  string    `json:"issuer"`
	Domain  string    `json:"domain"`
	Scopes  []string  `json:"scopes"`
	Expires time.Time `json:"expires"`
	Page    string    `json:"page"` // the page's URL, as the model was given it
	Status  string    `json:"status"`
	Granted []string  `json:"granted,omitempty"`
	Missing []string  `json:"missing,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// SavePageFlow keeps f in place of the Company's earlier page sign-in and
// announces it on SignInChannel.
func SavePageFlow(ctx context.Context, st FlowStore, f *PageFlow) error {
	if f.ID == "" || f.Issuer == "" || f.Status == "" {
		return errors.New("auth: save page sign-in: an ID, an issuer and a status are required")
	}
	raw, err := json.Marshal(f)
	if err == nil {
		err = st.PutSecret(ctx, pageFlowPrefix+f.Issuer, raw)
	}
	if err != nil {
		return fmt.Errorf("auth: save page sign-in: %w", err)
	}
	_ = st.Notify(ctx, SignInChannel, FlowKey(st, f.Issuer)) // at most once: waiters read the store again soon
	return nil
}

// LoadPageFlow returns the Company's kept page sign-in, or an error
// matching store.ErrNotFound when there is none.
func LoadPageFlow(ctx context.Context, st FlowStore, issuer string) (*PageFlow, error) {
	raw, err := st.Secret(ctx, pageFlowPrefix+issuer)
	if err != nil {
		return nil, fmt.Errorf("auth: load page sign-in: %w", err)
	}
	var f PageFlow
	if err := json.Unmarshal(raw, &f); err != nil || f.ID == "" || f.Status == "" {
		return nil, fmt.Errorf("auth: kept page sign-in is unreadable: %w", errNotKept)
	}
	return &f, nil
}

// errNotKept is a kept sign-in that cannot be read: as good as none.
var errNotKept = errors.New("not kept")

// keptPage is f as the store keeps it.
func keptPage(issuer string, f *Flow) *PageFlow {
	st := f.State()
	return &PageFlow{ID: f.ID, Kind: f.Kind, Issuer: issuer, Domain: f.Domain, Scopes: slices.Clone(f.Scopes), Expires: f.Expires,
		Page: f.Page, Status: st.Status, Granted: st.Granted, Missing: st.Missing, Detail: st.Detail}
}

// fromKeptPage is the local picture of a page sign-in another replica
// started; stopping it stops nothing here.
func fromKeptPage(kept *PageFlow) *Flow {
	f := NewFlow(kept.Kind, kept.Domain, kept.Scopes, nil)
	f.ID, f.Expires, f.Page = kept.ID, kept.Expires, kept.Page
	if kept.Status != FlowPending {
		f.End(kept.Status, kept.Granted, kept.Missing, kept.Detail)
	}
	return f
}

// StartPage makes f, a Direct or Mediated sign-in whose page is open, the
// latest at the Company issuer and keeps it, so that a replica the page is
// used on finishes it and this one hears how it ended. Without a store (or
// when it cannot be kept) it works through this replica alone.
func (s *SignIns) StartPage(ctx context.Context, issuer string, f *Flow) {
	s.keeping.Lock()
	defer s.keeping.Unlock()
	s.Replace(issuer, f)
	if s.store == nil {
		return
	}
	if err := SavePageFlow(ctx, s.store, keptPage(issuer, f)); err != nil {
		s.o.Logger.WarnContext(ctx, "could not keep the sign-in in the store: only this replica can finish it", "issuer", issuer, "err", err)
	}
}

// Picture returns the sign-in id at the Company issuer for a page used on
// this replica: this replica's own when it started it, else a picture of
// the kept one, which Finish ends and keeps as the outcome (it is not
// made this replica's latest: Latest reads the kept one). It is nil when
// id is no longer the Company's latest sign-in (a newer one replaced it),
// or unknown.
func (s *SignIns) Picture(ctx context.Context, issuer, id string) *Flow {
	f := s.Current(issuer)
	var kept *PageFlow
	if s.store != nil {
		var err error
		if kept, err = LoadPageFlow(ctx, s.store, issuer); err == nil && kept.ID != id {
			return nil // replaced, through this replica or another
		}
	}
	if f != nil && f.ID == id {
		return f
	}
	if kept == nil {
		return nil
	}
	return fromKeptPage(kept)
}

// keepPageOutcome saves how a page sign-in ended, unless a newer sign-in
// replaced it in the store.
func (s *SignIns) keepPageOutcome(ctx context.Context, issuer string, f *Flow) {
	if s.store == nil || f.Kind.polls() {
		return
	}
	s.keeping.Lock()
	defer s.keeping.Unlock()
	if now, err := LoadPageFlow(ctx, s.store, issuer); err == nil && now.ID != f.ID {
		return
	}
	if err := SavePageFlow(ctx, s.store, keptPage(issuer, f)); err != nil {
		s.o.Logger.WarnContext(ctx, "could not keep how the sign-in ended: the replica that started it will not hear of it", "issuer", issuer, "err", err)
	}
}

// latestPage brings f, this replica's pending page sign-in, in step with
// the kept one: finished on another replica, it ends here as it ended
// there, and a complete one first signs this replica's Session in with
// the Account Token the store now holds.
func (s *SignIns) latestPage(ctx context.Context, issuer string, f *Flow) *Flow {
	if !f.Pending() {
		return f
	}
	kept, err := LoadPageFlow(ctx, s.store, issuer)
	if err != nil || kept.ID != f.ID || kept.Status == FlowPending {
		return f
	}
	if kept.Status == FlowComplete {
		s.adopt(ctx, issuer, kept.Domain, kept.Scopes) // before anyone here reads it complete
	}
	if f.End(kept.Status, kept.Granted, kept.Missing, kept.Detail) {
		f.StopPage()
	}
	return f
}

// pendingPage is the picture of the Company's kept page sign-in while it
// is pending and unexpired, for a replica that knows of no sign-in there;
// nil otherwise.
func (s *SignIns) pendingPage(ctx context.Context, issuer string) *Flow {
	kept, err := LoadPageFlow(ctx, s.store, issuer)
	if err != nil || kept.Status != FlowPending || !kept.Expires.IsZero() && !s.o.Now().Before(kept.Expires) {
		return nil
	}
	f := fromKeptPage(kept)
	s.Replace(issuer, f)
	return f
}
