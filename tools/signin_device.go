package tools

// This file serves sign_in_device: Device Sign-In (Poppy 0.1 §4.6). The tool
// returns what the user needs (never the device code) and polls in the
// background, in a goroutine the Server owns and stops on Close; where the
// client supports URL-mode elicitation the verification URL is offered that
// way too.

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

func (si *signIn) deviceTool() tool {
	return newTool("sign_in_device",
		"Sign the user in to a Company account on their own device: returns a link and a short code for the user. "+
			"poppy-mcp waits for the user in the background; call sign_in_status with wait_seconds to learn when it is done. "+
			"Uses an Account Token poppy-mcp already holds instead, when it covers the scopes.",
		annotations{title: "Sign in on another device", openWorld: true},
		si.device)
}

func (si *signIn) device(ctx context.Context, req mcp.CallToolRequest, args signInArgs) *mcp.CallToolResult {
	domain := args.Domain
	start, done := si.begin(ctx, req, args, "device", "sign_in_device")
	if done != nil {
		return done
	}
	cs, sess, scopes := start.cs, start.sess, start.scopes
	if f := si.latest(ctx, cs); f != nil && f.device != nil && sameScopes(f.scopes, scopes) && isPending(f) && f.domain == domain {
		// The user may already be on the page (the sign-in may have been
		// started through another replica): no second code.
		return si.offerDevice(ctx, cs, f)
	}
	d, err := sess.StartDevice(ctx, scopes)
	if err != nil {
		if r, ok := si.needed(ctx, domain, err); ok {
			return r
		}
		return si.sessions.failure(ctx, domain, err)
	}
	f := newFlow("device", domain, scopes)
	f.device, f.expires = d, d.ExpiresAt
	kept := &auth.DeviceFlow{ID: f.id, Issuer: cs.Issuer(), Domain: domain, Device: d, Interval: d.Interval, Status: statusPending,
		Owner: ownerOf(cs.Person().User())}
	l, err := si.lease(detach(ctx), cs.Store(), kept) // its log lines name the person and the request
	if err != nil {
		return si.sessions.failure(ctx, domain, err)
	}
	f.close = l.cancel
	si.replace(cs, f) // before it is announced, so this replica knows it as its own
	si.keep(ctx, cs, kept)
	si.poll(cs, sess, f, kept, l)
	si.log.InfoContext(ctx, "device sign-in started", "issuer", cs.Issuer(), "scopes", strings.Join(scopes, " "))
	return si.offerDevice(ctx, cs, f)
}

// offerDevice is the result for a pending device sign-in: URL-mode
// elicitation of the verification URL where the client supports it, else
// the fields for the model to show.
func (si *signIn) offerDevice(ctx context.Context, cs *agent.Company, f *signInFlow) *mcp.CallToolResult {
	if elicitsURL(ctx) && isPending(f) {
		u := f.device.VerificationURIComplete
		if u == "" {
			u = f.device.VerificationURI
		}
		return si.elicitURL(ctx, cs, f, u, fmt.Sprintf("Sign in to %s to let your assistant use your account. Check that the page shows the code %s.",
			f.domain, f.device.UserCode))
	}
	return si.flowResult(cs, f, "")
}

// leasedPoll is the right to poll one sign-in: its context ends when the
// Server closes, a newer sign-in replaces it (cancel) or, for a kept one,
// the lease is lost; release gives the lease back.
type leasedPoll struct {
	ctx     context.Context
	cancel  context.CancelFunc
	release func()
}

// lease takes the lease of polling kept (auth.LeaseDeviceFlow) in st, the
// person's view of the store, at once or not at all: exactly one replica
// polls a kept sign-in. Without a store (kept is then not shared) it always
// succeeds. base (never cancelled) carries what the polling logs with: the
// person.
func (si *signIn) lease(base context.Context, st *store.Store, kept *auth.DeviceFlow) (*leasedPoll, error) {
	ctx, cancel := context.WithCancel(base)
	if st == nil {
		return &leasedPoll{ctx: ctx, cancel: cancel, release: func() {}}, nil
	}
	leased, release, err := auth.LeaseDeviceFlow(ctx, st, kept)
	if err != nil {
		cancel()
		return nil, err
	}
	return &leasedPoll{ctx: leased, cancel: cancel, release: release}, nil
}

// poll makes f (whose close is l.cancel) the Company's sign-in and polls it
// under l in the background, in a goroutine the Server owns. When a kept
// sign-in's polling stops here unfinished (the lease lost, or poppy-mcp
// shutting down), it stays pending in the store and another replica takes
// it over (takeOver).
func (si *signIn) poll(cs *agent.Company, sess *auth.Session, f *signInFlow, kept *auth.DeviceFlow, l *leasedPoll) {
	si.replace(cs, f) // nothing when f is the Company's sign-in already
	st := cs.Store()
	started := cs.Person().Go(func(bg context.Context) { // forgetting the person or Close stops it
		defer l.release()
		defer si.metrics.SigningIn()()
		stop := context.AfterFunc(bg, l.cancel) // Close stops polling
		defer stop()
		var in *auth.SignIn
		var err error
		if st == nil {
			in, err = sess.PollDevice(l.ctx, f.device)
		} else if in, err = sess.PollDeviceFlow(l.ctx, st, kept); err != nil && l.ctx.Err() != nil {
			// Stopped unfinished: replaced by a newer sign-in (ended
			// already), or left pending in the store for another replica.
			si.log.InfoContext(l.ctx, "device sign-in polling stopped here", "issuer", cs.Issuer(), "err", err)
			return
		}
		// The outcome is kept even while shutting down, so it is not lost.
		done := context.WithoutCancel(l.ctx)
		si.finish(done, cs, sess, f, in, err)
		if st != nil {
			si.keepOutcome(done, cs, f, kept)
		}
	})
	if !started {
		l.cancel()
		l.release()
		f.end(statusFailed, nil, nil, "poppy-mcp is shutting down.")
	}
}

func isPending(f *signInFlow) bool {
	status, _, _, _ := f.state()
	return status == statusPending
}

func sameScopes(a, b []string) bool { return covers(a, b) && covers(b, a) }
