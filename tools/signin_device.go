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
	if f := si.current(cs); f != nil && f.device != nil && sameScopes(f.scopes, scopes) && isPending(f) && f.domain == domain {
		return si.offerDevice(ctx, cs, f) // the user may already be on the page: no second code
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
	pollCtx, cancel := context.WithCancel(detach(ctx)) // its log lines name the person and the request
	f.close = cancel
	si.replace(cs, f)
	started := si.bg.Go(func(bg context.Context) {
		stop := context.AfterFunc(bg, cancel) // Close stops polling
		defer stop()
		in, err := sess.PollDevice(pollCtx, d)
		// The outcome is kept even while shutting down, so it is not lost.
		si.finish(context.WithoutCancel(pollCtx), cs, sess, f, in, err)
	})
	if !started {
		cancel()
		f.end(statusFailed, nil, nil, "poppy-mcp is shutting down.")
	}
	si.log.InfoContext(ctx, "device sign-in started", "issuer", cs.issuer, "scopes", strings.Join(scopes, " "))
	return si.offerDevice(ctx, cs, f)
}

// offerDevice is the result for a pending device sign-in: URL-mode
// elicitation of the verification URL where the client supports it, else
// the fields for the model to show.
func (si *signIn) offerDevice(ctx context.Context, cs *companyState, f *signInFlow) *mcp.CallToolResult {
	if elicitsURL(ctx) && isPending(f) {
		u := f.device.VerificationURIComplete
		if u == "" {
			u = f.device.VerificationURI
		}
		return elicitURL(f, u, fmt.Sprintf("Sign in to %s to let your assistant use your account. Check that the page shows the code %s.",
			f.domain, f.device.UserCode))
	}
	return si.flowResult(cs, f, "")
}

func isPending(f *signInFlow) bool {
	status, _, _, _ := f.state()
	return status == statusPending
}

func sameScopes(a, b []string) bool { return covers(a, b) && covers(b, a) }
