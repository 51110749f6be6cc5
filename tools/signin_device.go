package tools

// This file serves sign_in_device: Device Sign-In (Poppy 0.1 §4.6). The tool
// returns what the user needs (never the device code); the person's
// sign-ins poll in the background (auth.SignIns.StartDevice) until the
// person is forgotten or the Server closes; where the client supports
// URL-mode elicitation the verification URL is offered that way too.

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
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
	start, done := si.begin(ctx, req, args, auth.KindDevice)
	if done != nil {
		return done
	}
	cs, scopes := start.cs, start.scopes
	if f := si.latest(ctx, cs); f != nil && f.Device != nil && sameScopes(f.Scopes, scopes) && f.Pending() && f.Domain == domain {
		// The user may already be on the page (the sign-in may have been
		// started through another replica): no second code.
		return si.offerDevice(ctx, cs, f)
	}
	f, err := cs.Person().SignIns().StartDevice(ctx, cs.Issuer(), domain, start.sess, scopes)
	if err != nil {
		if r, ok := si.needed(ctx, domain, err); ok {
			return r
		}
		return si.sessions.failure(ctx, domain, err)
	}
	return si.offerDevice(ctx, cs, f)
}

// offerDevice is the result for a pending device sign-in: URL-mode
// elicitation of the verification URL where the client supports it, else
// the fields for the model to show.
func (si *signIn) offerDevice(ctx context.Context, cs *agent.Company, f *auth.Flow) *mcp.CallToolResult {
	if elicitsURL(ctx) && f.Pending() {
		u := f.Device.VerificationURIComplete
		if u == "" {
			u = f.Device.VerificationURI
		}
		return si.elicitURL(ctx, cs, f, u, fmt.Sprintf("Sign in to %s to let your assistant use your account. Check that the page shows the code %s.",
			f.Domain, f.Device.UserCode))
	}
	return si.flowResult(cs, f, "")
}

func sameScopes(a, b []string) bool { return covers(a, b) && covers(b, a) }
