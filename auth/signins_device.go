package auth

// This file is the Device Sign-In half of SignIns (Poppy 0.1 §4.6): a
// sign-in started here is kept in the store (SaveDeviceFlow) and polled in
// the background under a lease (LeaseDeviceFlow), so that exactly one
// replica polls it; a replica that did not start it reads it from the
// store, and signs its own Session in with the Account Token once it
// completed elsewhere.

import (
	"context"
	"errors"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// StartDevice starts a Device Sign-In at the Company issuer, through
// domain, with sess for scopes, makes it the Company's latest, keeps it in
// the store and polls it in the background until it ends. Its lease is
// taken from the poller of the sign-in it replaces, on whichever replica,
// so that one writes nothing from then on. Its error is
// Session.StartDevice's, or the store's when the lease cannot be taken.
func (s *SignIns) StartDevice(ctx context.Context, issuer, domain string, sess *Session, scopes []string) (*Flow, error) {
	d, err := sess.StartDevice(ctx, scopes)
	if err != nil {
		return nil, err
	}
	f := NewFlow(KindDevice, domain, scopes, nil)
	f.Device, f.Expires = d, d.ExpiresAt
	kept := &DeviceFlow{ID: f.ID, Issuer: issuer, Domain: domain, Device: d, Interval: d.Interval, Status: FlowPending, Owner: s.o.Owner}
	l, err := s.lease(s.o.Detach(ctx), issuer, true) // its log lines name the person and the request
	if err != nil {
		return nil, err
	}
	f.SetStop(l.cancel)
	s.Replace(issuer, f) // before it is announced, so this replica knows it as its own
	s.keep(ctx, l, kept)
	s.poll(issuer, sess, f, kept, l)
	s.o.Logger.InfoContext(ctx, "device sign-in started", "issuer", issuer, "scopes", strings.Join(scopes, " "))
	return f, nil
}

// leasedPoll is the right to poll one sign-in: its context ends when the
// server closes, a newer sign-in replaces it (cancel) or, for a kept one,
// the lease is lost; dl is the lease (nil without a store).
type leasedPoll struct {
	ctx    context.Context
	cancel context.CancelFunc
	dl     *DeviceLease
}

// release gives the lease back.
func (l *leasedPoll) release() {
	if l.dl != nil {
		l.dl.Release()
	}
}

// lease takes the lease of polling the Company issuer's kept sign-in
// (LeaseDeviceFlow): from whoever has it for a newer sign-in, else at once
// or not at all. Without a store (the sign-in is then not shared) it
// always succeeds. base (never cancelled) carries what the polling logs
// with.
func (s *SignIns) lease(base context.Context, issuer string, newer bool) (*leasedPoll, error) {
	ctx, cancel := context.WithCancel(base)
	if s.store == nil {
		return &leasedPoll{ctx: ctx, cancel: cancel}, nil
	}
	dl, err := LeaseDeviceFlow(ctx, s.store, issuer, newer)
	if err != nil {
		cancel()
		return nil, err
	}
	return &leasedPoll{ctx: dl.Polling, cancel: cancel, dl: dl}, nil
}

// poll makes f (whose stop is l.cancel) the Company's sign-in and polls it
// under l in the background. When a kept sign-in's polling stops here
// unfinished (the lease lost, or the server shutting down), it stays
// pending in the store and another replica takes it over (TakeOver), or
// goes on with it already.
func (s *SignIns) poll(issuer string, sess *Session, f *Flow, kept *DeviceFlow, l *leasedPoll) {
	s.Replace(issuer, f) // nothing when f is the Company's sign-in already
	started := s.o.Go(func(bg context.Context) {
		defer l.release()
		defer s.o.SigningIn()()
		stop := context.AfterFunc(bg, l.cancel) // closing stops polling
		defer stop()
		var in *SignIn
		var err error
		if l.dl == nil {
			in, err = sess.PollDevice(l.ctx, f.Device)
		} else if in, err = sess.PollDeviceFlow(l.ctx, l.dl, kept); err != nil && (l.ctx.Err() != nil || errors.Is(err, store.ErrLeaseLost)) {
			// Stopped unfinished: replaced by a newer sign-in (ended
			// already), or left pending in the store for another replica.
			s.stopped(l, issuer, err)
			return
		}
		// The outcome is kept even while shutting down, so it is not lost.
		done := context.WithoutCancel(l.ctx)
		s.Finish(done, issuer, sess, f, in, err)
		s.keepOutcome(done, l, f, kept)
	})
	if !started {
		l.cancel()
		l.release()
		f.End(FlowFailed, nil, nil, "poppy-mcp is shutting down.")
	}
}

// stopped logs why polling a kept sign-in stopped here unfinished.
func (s *SignIns) stopped(l *leasedPoll, issuer string, err error) {
	if errors.Is(err, store.ErrLeaseLost) || l.dl.Check(context.WithoutCancel(l.ctx)) != nil {
		s.o.Logger.InfoContext(l.ctx, "device sign-in polling stopped here: lost the lease (another replica polls it, or a newer sign-in replaced it)", "issuer", issuer)
		return
	}
	s.o.Logger.InfoContext(l.ctx, "device sign-in polling stopped here", "issuer", issuer, "err", err)
}

// keep saves a sign-in as it is now, under its lease l; without a store,
// the sign-in still works through this replica alone.
func (s *SignIns) keep(ctx context.Context, l *leasedPoll, kept *DeviceFlow) {
	if l.dl == nil {
		return
	}
	err := SaveDeviceFlow(ctx, l.dl.Store, kept)
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		// A newer sign-in took the lease, here or on another replica: it
		// is the one kept, and this one's outcome is not news.
		s.o.Logger.InfoContext(ctx, "lost the lease of the device sign-in: it is not kept", "issuer", kept.Issuer)
	case err != nil:
		s.o.Logger.WarnContext(ctx, "could not keep the device sign-in in the store: only this replica can finish it", "issuer", kept.Issuer, "err", err)
	}
}

// keepOutcome saves how f ended, under its lease l: when a newer sign-in
// replaced it, here or through another replica, or another poller took
// it over, that one holds the lease and the write changes nothing (a
// compare-and-set, by the lease's fencing token).
func (s *SignIns) keepOutcome(ctx context.Context, l *leasedPoll, f *Flow, kept *DeviceFlow) {
	st := f.State()
	kept.Status, kept.Granted, kept.Missing, kept.Detail = st.Status, st.Granted, st.Missing, st.Detail
	s.keep(ctx, l, kept)
}

// fromKept is the local picture of a sign-in another replica started or
// polls; stopping it stops nothing here.
func fromKept(kept *DeviceFlow) *Flow {
	f := NewFlow(KindDevice, kept.Domain, kept.Device.Scopes, nil)
	f.ID, f.Device, f.Expires = kept.ID, kept.Device, kept.Device.ExpiresAt
	if kept.Status != FlowPending {
		f.End(kept.Status, kept.Granted, kept.Missing, kept.Detail)
	}
	return f
}

// Latest returns the latest sign-in at the Company issuer, brought in step
// with the kept one: started through another replica, or finished there.
// A sign-in that completed elsewhere signs this replica's Session in with
// the Account Token the store now holds. Direct and Mediated sign-ins are
// followed the same way (signins_page.go).
func (s *SignIns) Latest(ctx context.Context, issuer string) *Flow {
	f := s.Current(issuer)
	switch {
	case s.store == nil:
		return f
	case f != nil && !f.Kind.polls():
		return s.latestPage(ctx, issuer, f)
	}
	kept, err := LoadDeviceFlow(ctx, s.store, issuer)
	if f == nil && (err != nil || kept.Status != FlowPending) {
		if p := s.pendingPage(ctx, issuer); p != nil {
			return p // a page sign-in pending through another replica
		}
	}
	if err != nil {
		return f
	}
	if (f == nil || f.ID != kept.ID) && kept.Status != FlowPending && !s.o.Now().Before(kept.Device.ExpiresAt) {
		return f // a sign-in that ended before its code expired is history, not news
	}
	if f != nil && f.ID == kept.ID && (kept.Status == FlowPending || !f.Pending()) {
		return f // nothing new
	}
	if kept.Status == FlowComplete {
		s.adopt(ctx, issuer, kept.Domain, kept.Device.Scopes) // before anyone here reads it complete
	}
	if f == nil || f.ID != kept.ID {
		f = fromKept(kept)
		s.Replace(issuer, f)
	} else if f.End(kept.Status, kept.Granted, kept.Missing, kept.Detail) {
		f.StopPage()
	}
	return f
}

// adopt signs this replica's Session in with the Account Token a sign-in
// for scopes through domain, finished on another replica, left in the
// store (Session.SignInHeld).
func (s *SignIns) adopt(ctx context.Context, issuer, domain string, scopes []string) {
	if s.o.Open == nil {
		return
	}
	sess, err := s.o.Open(ctx, domain)
	if err == nil {
		err = sess.SignInHeld(ctx, scopes)
	}
	if err != nil {
		s.o.Logger.WarnContext(ctx, "could not sign in with the Account Token another replica obtained", "issuer", issuer, "err", err)
		return
	}
	s.sessions.Save(ctx, issuer, sess)
}

// TakeOver polls kept, a pending sign-in of the person that no replica
// polls (started through a replica that died or shut down, or through an
// earlier run), here when its lease is free: the lease is tried first, so
// a sign-in polled elsewhere (or here) costs one statement. ctx acts for
// the person.
func (s *SignIns) TakeOver(ctx context.Context, kept *DeviceFlow) {
	l, err := s.lease(s.o.Detach(ctx), kept.Issuer, false)
	if err != nil {
		if !errors.Is(err, store.ErrLeaseHeld) {
			s.o.Logger.DebugContext(ctx, "could not take the device sign-in over", "issuer", kept.Issuer, "err", err)
		}
		return
	}
	// Under the lease the kept sign-in changes only through its holder:
	// it is read again, as a poller before may have finished it meanwhile.
	if now, err := LoadDeviceFlow(ctx, s.store, kept.Issuer); err != nil || now.ID != kept.ID || now.Status != FlowPending {
		l.cancel()
		l.release()
		return
	}
	if s.o.Open == nil {
		err = errors.New("auth: no Session to poll with")
	}
	var sess *Session
	if err == nil {
		sess, err = s.o.Open(ctx, kept.Domain)
	}
	if err != nil {
		l.cancel()
		l.release()
		s.o.Logger.WarnContext(ctx, "could not take the device sign-in over: no Session", "issuer", kept.Issuer, "err", err)
		return
	}
	f := fromKept(kept) // in place of this replica's picture of it, if any: the same sign-in
	f.SetStop(l.cancel)
	s.o.Logger.InfoContext(ctx, "taking over a device sign-in no replica polls", "issuer", kept.Issuer)
	s.poll(kept.Issuer, sess, f, kept, l)
}

// Listen returns a channel that receives when a kept sign-in at the
// Company issuer changes (SignInChannel), until ctx ends; nil (never
// ready) without a store or when the store cannot listen.
func (s *SignIns) Listen(ctx context.Context, issuer string) <-chan struct{} {
	if s.store == nil {
		return nil
	}
	notes, err := s.store.Listen(ctx, SignInChannel)
	if err != nil {
		return nil
	}
	key := FlowKey(s.store, issuer)
	changed := make(chan struct{}, 1)
	go func() {
		for p := range notes {
			if p == key {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return changed
}

// Heard brings the person's Sessions in step with a change of a kept
// sign-in another replica announced (SignInChannel, whose payload is key):
// a Session of this replica at that Company is signed in with the Account
// Token the other replica stored, so the person's next call here uses the
// account at once. ctx acts for the person.
func (s *SignIns) Heard(ctx context.Context, key string) {
	if s.store == nil || s.sessions == nil {
		return
	}
	for _, issuer := range s.sessions.Issuers() {
		if FlowKey(s.store, issuer) == key && s.sessions.Current(issuer) != nil {
			s.Latest(ctx, issuer)
		}
	}
}
