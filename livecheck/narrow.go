package livecheck

// This file probes narrower tokens (Poppy 0.1 §4.3): a token issued for one
// service must not work at another. A Company that gives an API a resource
// "accepts a token at such a service only if it was issued for that
// resource"; an MCP server's Bearer token "works at only one MCP server",
// and Companies "MUST accept Bearer Session Tokens only on their MCP APIs".

import (
	"context"

	"github.com/poppy-mcp/poppy-mcp/auth"
)

// checkOtherResource sends the target, an API with a resource, the main
// Session's general token.
func (r *run) checkOtherResource(ctx context.Context) outcome {
	t := r.target
	if t == nil || t.resource == "" {
		return skip("no operation of an API with a resource answered, to probe with")
	}
	o, _ := r.mustRefuse(ctx, call{url: t.url, scheme: "DPoP", token: r.main.token, key: r.main.key}, t.control,
		"a Session Token issued for no resource at "+t.name+", whose API has resource "+t.resource, "invalid_token")
	return o
}

// checkResourceElsewhere sends the token issued for the target's resource
// to a general service: a read of an unknown conversation.
func (r *run) checkResourceElsewhere(ctx context.Context) outcome {
	t := r.target
	if t == nil || t.resource == "" {
		return skip("no operation of an API with a resource answered, to take its token from")
	}
	general := r.unknownTarget()
	if o, ok := r.control(ctx, general); !ok {
		return o
	}
	tok, err := r.resourceToken(ctx, t.resource)
	if err != nil {
		return unavailable("the resource's token", err)
	}
	o, _ := r.mustRefuse(ctx, call{url: general.url, scheme: "DPoP", token: tok, key: r.main.key}, general.control,
		"a Session Token issued for resource "+t.resource+" at "+general.name, "invalid_token")
	return o
}

// checkMCPBearer gets a Bearer token for the first MCP server and sends it
// to the target, a DPoP API.
func (r *run) checkMCPBearer(ctx context.Context) outcome {
	t := r.target
	if t == nil {
		return skip("no API request to probe with")
	}
	mcp := r.ep.mcp[0]
	// Poppy 0.1 §4.3: the agent "sends the request that renews the Session's token ... without the DPoP header, and MUST include resource"
	x, err := r.postToken(ctx, grant{assertion: r.sessionAssertion(), sessionID: r.main.id, resource: mcp})
	if err != nil {
		return unavailable("the Bearer token request", err)
	}
	tr, err := issued(x)
	if err != nil {
		return skip("the token endpoint issued no Bearer token for the MCP server %s (%v), so there is none to probe with", mcp, err)
	}
	o, _ := r.mustRefuse(ctx, call{url: t.url, scheme: "Bearer", token: auth.NewSecret(tr.accessToken)}, t.control,
		"the Bearer token issued for the MCP server "+mcp+" at "+t.name)
	return o
}
