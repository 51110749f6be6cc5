package tools

// This file keeps device sign-ins in the store, so that several replicas
// sharing it act as one (auth/deviceflow.go has the mechanism): a sign-in
// started through one replica is read and finished through any other, one
// replica polls it at a time, and another takes over within seconds when
// that one dies. The tools here only call auth and phrase what it keeps.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// takeOverEvery is how often a replica looks for kept device sign-ins that
// nobody polls: with auth.DeviceLeaseTTL, a dead poller is replaced within
// about 12 seconds.
const takeOverEvery = 2 * time.Second

// keep saves a sign-in as it is now, in the store view of cs's person;
// without a store, the sign-in still works through this replica alone.
func (si *signIn) keep(ctx context.Context, cs *agent.Company, kept *auth.DeviceFlow) {
	if cs.Store() == nil {
		return
	}
	if err := auth.SaveDeviceFlow(ctx, cs.Store(), kept); err != nil {
		si.log.WarnContext(ctx, "could not keep the device sign-in in the store: only this replica can finish it", "issuer", kept.Issuer, "err", err)
	}
}

// keepOutcome saves how f ended, unless a newer sign-in replaced it.
func (si *signIn) keepOutcome(ctx context.Context, cs *agent.Company, f *signInFlow, kept *auth.DeviceFlow) {
	if cs.Store() == nil {
		return
	}
	if now, err := auth.LoadDeviceFlow(ctx, cs.Store(), kept.Issuer); err == nil && now.ID != kept.ID {
		return
	}
	kept.Status, kept.Granted, kept.Missing, kept.Detail = f.state()
	si.keep(ctx, cs, kept)
}

// ownerOf is what a kept sign-in records of the person it is for, so that
// a replica taking it over acts for that person: the person's (issuer,
// sub) as JSON, kept encrypted with the rest of the sign-in; "" for the
// one person of a single-user deployment.
func ownerOf(person mcpauth.User) string {
	if person.IsZero() {
		return ""
	}
	b, _ := json.Marshal([2]string{person.Issuer, person.Subject})
	return string(b)
}

// ownerContext returns ctx acting for the person a kept sign-in of the
// local user key is for, and whether that person is known and is key's.
func ownerContext(ctx context.Context, key string, kept *auth.DeviceFlow) (context.Context, bool) {
	if key == "" {
		return ctx, kept.Owner == ""
	}
	var pair [2]string
	if json.Unmarshal([]byte(kept.Owner), &pair) != nil {
		return ctx, false
	}
	person := mcpauth.User{Issuer: pair[0], Subject: pair[1]}
	return mcpauth.WithUser(ctx, person), person.Key() == key
}

// fromKept is the local picture of a sign-in another replica started or
// polls; closing it stops nothing here.
func fromKept(kept *auth.DeviceFlow) *signInFlow {
	f := newFlow("device", kept.Domain, kept.Device.Scopes)
	f.id, f.device, f.expires = kept.ID, kept.Device, kept.Device.ExpiresAt
	if kept.Status != statusPending {
		f.end(kept.Status, kept.Granted, kept.Missing, kept.Detail)
	}
	return f
}

// latest returns the Company's latest sign-in, brought in step with the
// kept one: started through another replica, or finished there. A sign-in
// that completed elsewhere signs this replica's Session in with the
// Account Token the store now holds.
func (si *signIn) latest(ctx context.Context, cs *agent.Company) *signInFlow {
	f := si.current(cs)
	st := cs.Store()
	if st == nil || f != nil && f.kind != "device" {
		return f // direct and mediated sign-ins live on the replica whose page they use
	}
	kept, err := auth.LoadDeviceFlow(ctx, st, cs.Issuer())
	if err != nil {
		return f
	}
	if (f == nil || f.id != kept.ID) && kept.Status != statusPending && !si.now().Before(kept.Device.ExpiresAt) {
		return f // a sign-in that ended before its code expired is history, not news
	}
	if f != nil && f.id == kept.ID && (kept.Status == statusPending || !isPending(f)) {
		return f // nothing new
	}
	if kept.Status == statusComplete {
		si.adopt(ctx, cs, kept) // before anyone here reads it complete
	}
	if f == nil || f.id != kept.ID {
		f = fromKept(kept)
		si.replace(cs, f)
	} else if f.end(kept.Status, kept.Granted, kept.Missing, kept.Detail) {
		f.close()
	}
	return f
}

// adopt signs this replica's Session in with the Account Token a sign-in
// finished on another replica left in the store (auth.Session.SignInHeld).
func (si *signIn) adopt(ctx context.Context, cs *agent.Company, kept *auth.DeviceFlow) {
	ctx = cs.Person().WithPerson(ctx) // the Session of cs's person, whoever's work this is
	r, err := si.sessions.session(ctx, kept.Domain, false)
	if err == nil {
		err = r.sess.SignInHeld(ctx, kept.Device.Scopes)
	}
	if err != nil {
		si.log.WarnContext(ctx, "could not sign in with the Account Token another replica obtained", "issuer", cs.Issuer(), "err", err)
		return
	}
	si.sessions.saveSignedIn(ctx, cs, r.sess)
}

// takeOver polls, until ctx ends, the kept device sign-ins that no replica
// polls: started through a replica that died or shut down, or through an
// earlier run of poppy-mcp, for any person. It runs on the Server's
// background.
func (si *signIn) takeOver(ctx context.Context) {
	every(ctx, takeOverEvery, func() {
		users, err := auth.DeviceFlowHolders(ctx, si.sessions.store) // one query, however many people
		if err != nil {
			si.log.Debug("could not list the people with kept device sign-ins", "err", err)
			return
		}
		for _, key := range users {
			si.takeOverFor(ctx, key)
		}
	})
}

// takeOverFor takes over the kept device sign-ins of the local user key.
func (si *signIn) takeOverFor(ctx context.Context, key string) {
	st := si.sessions.store.ForUser(key)
	flows, err := auth.DeviceFlows(ctx, st)
	if err != nil {
		si.log.Debug("could not list the kept device sign-ins", "err", err)
		return
	}
	for _, kept := range flows {
		if kept.Status != statusPending || !si.now().Before(kept.Device.ExpiresAt) {
			continue
		}
		if pctx, ok := ownerContext(ctx, key, kept); ok {
			si.takeOne(pctx, st, kept)
		}
	}
}

// takeOne polls kept, a sign-in of the person ctx acts for kept in st,
// here when its lease is free: the lease is tried first, so a sign-in
// polled elsewhere (or here) costs one statement.
func (si *signIn) takeOne(ctx context.Context, st *store.Store, kept *auth.DeviceFlow) {
	l, err := si.lease(detach(ctx), st, kept)
	if err != nil {
		if !errors.Is(err, store.ErrLeaseHeld) {
			si.log.DebugContext(ctx, "could not take the device sign-in over", "issuer", kept.Issuer, "err", err)
		}
		return
	}
	r, err := si.sessions.session(ctx, kept.Domain, false)
	if err == nil && r.cs.Store().User() != st.User() {
		err = errors.New("tools: the sign-in's person and Session differ")
	}
	if err != nil {
		l.cancel()
		l.release()
		si.log.WarnContext(ctx, "could not take the device sign-in over: no Session", "issuer", kept.Issuer, "err", err)
		return
	}
	f := fromKept(kept) // in place of this replica's picture of it, if any: the same sign-in
	f.close = l.cancel
	si.log.InfoContext(ctx, "taking over a device sign-in no replica polls", "issuer", kept.Issuer)
	si.poll(r.cs, r.sess, f, kept, l)
}

// listen returns a channel that receives when a kept sign-in of the
// Company cs is changes (auth.SignInChannel), until ctx ends; nil (never
// ready) without a store or when the store cannot listen.
func (si *signIn) listen(ctx context.Context, cs *agent.Company) <-chan struct{} {
	st := si.sessions.store
	if st == nil {
		return nil
	}
	notes, err := st.Listen(ctx, auth.SignInChannel)
	if err != nil {
		return nil
	}
	key := auth.FlowKey(cs.Store(), cs.Issuer())
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

// follow brings this replica's Sessions in step with the sign-ins other
// replicas finish, as soon as they announce them (auth.SignInChannel),
// until ctx ends: a Session of this replica is signed in with the Account
// Token the other replica stored, so the person's next call here uses the
// account without a sign_in_status first. It runs on the Server's
// background.
func (si *signIn) follow(ctx context.Context) {
	st := si.sessions.store
	notes, err := st.Listen(ctx, auth.SignInChannel)
	if err != nil {
		si.log.Warn("cannot hear of sign-ins other replicas finish; sign_in_status still reads them", "err", err)
		return
	}
	for key := range notes {
		for _, p := range si.sessions.people.all() {
			for _, cs := range p.Companies() {
				if auth.FlowKey(cs.Store(), cs.Issuer()) == key && cs.Session() != nil {
					si.latest(p.WithPerson(ctx), cs)
				}
			}
		}
	}
}
