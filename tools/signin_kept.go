package tools

// This file lets several replicas sharing a store act as one for device
// sign-ins (auth.SignIns has the mechanism, auth/deviceflow.go the kept
// form): this replica takes over the kept sign-ins nobody polls, of any
// person, and hears of those other replicas finish.

import (
	"context"
	"time"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
)

// takeOverEvery is how often a replica looks for kept device sign-ins that
// nobody polls: with auth.DeviceLeaseTTL, a dead poller is replaced within
// about 12 seconds.
const takeOverEvery = 2 * time.Second

// latest returns the Company's latest sign-in, brought in step with the
// kept one (auth.SignIns.Latest).
func (si *signIn) latest(ctx context.Context, cs *agent.Company) *auth.Flow {
	return cs.Person().SignIns().Latest(ctx, cs.Issuer())
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

// takeOverFor takes over the kept device sign-ins of the local user key,
// each for the person it records (agent.OwnerContext).
func (si *signIn) takeOverFor(ctx context.Context, key string) {
	flows, err := auth.DeviceFlows(ctx, si.sessions.store.ForUser(key))
	if err != nil {
		si.log.Debug("could not list the kept device sign-ins", "err", err)
		return
	}
	for _, kept := range flows {
		if kept.Status != statusPending || !si.now().Before(kept.Device.ExpiresAt) {
			continue
		}
		if pctx, ok := agent.OwnerContext(ctx, key, kept); ok {
			si.sessions.people.of(pctx).SignIns().TakeOver(pctx, kept)
		}
	}
}

// follow brings this replica's Sessions in step with the sign-ins other
// replicas finish, as soon as they announce them (auth.SignInChannel),
// until ctx ends: a Session of this replica is signed in with the Account
// Token the other replica stored, so the person's next call here uses the
// account without a sign_in_status first. It runs on the Server's
// background.
func (si *signIn) follow(ctx context.Context) {
	notes, err := si.sessions.store.Listen(ctx, auth.SignInChannel)
	if err != nil {
		si.log.Warn("cannot hear of sign-ins other replicas finish; sign_in_status still reads them", "err", err)
		return
	}
	for key := range notes {
		for _, p := range si.sessions.people.all() {
			p.SignIns().Heard(p.WithPerson(ctx), key)
		}
	}
}
