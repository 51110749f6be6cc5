package livecheck

// This file is the list of probes, in the order a run sends them: each with
// its ID, its section, what it sends (for --dry-run), when it applies, and
// the function that runs it. Later probes use what earlier ones set up: the
// main Session, then the API request the resource probes are sent as.

import (
	"context"
	"fmt"
)

// outcome is what one probe found.
type outcome struct {
	status   Status
	security bool
	msg      string
}

func pass(format string, args ...any) outcome {
	return outcome{status: Passed, msg: fmt.Sprintf(format, args...)}
}

func fail(format string, args ...any) outcome {
	return outcome{status: Failed, msg: fmt.Sprintf(format, args...)}
}

// breach is a Failed probe of something the Company must refuse and
// accepted: a security bug.
func breach(format string, args ...any) outcome {
	return outcome{status: Failed, security: true, msg: fmt.Sprintf(format, args...)}
}

func warn(format string, args ...any) outcome {
	return outcome{status: Warned, msg: fmt.Sprintf(format, args...)}
}

func skip(format string, args ...any) outcome {
	return outcome{status: Skipped, msg: fmt.Sprintf(format, args...)}
}

// probe is one check a run makes.
type probe struct {
	id, section string
	// does says what the probe sends, for --dry-run.
	does func(e *endpoints) string
	// when says why the probe does not apply to this Company or run; ""
	// when it does. It looks only at the documents and the Options, so
	// that Plan can tell too. Nil: it always applies.
	when func(r *run) string
	run  func(r *run, ctx context.Context) outcome // a method expression: receiver first
}

func (p probe) applies(r *run) string {
	if p.when == nil {
		return ""
	}
	return p.when(r)
}

// Sentences probes share, for --dry-run.
const (
	onTarget    = "GET the API operation api.read found"
	withMainTok = "with the main Session's token"
)

// probes are every probe, in the order they run.
var probes = []probe{
	{id: "session.start", section: "4.2", run: (*run).checkStart,
		does: func(e *endpoints) string {
			return "POST " + e.token + ": start a signed-out Session (JWT bearer grant, a User ID made for this run, a DPoP key of its own)"
		}},
	{id: "session.no_store", section: "4.2", run: (*run).checkNoStore,
		does: func(*endpoints) string { return "read Cache-Control of that token response (nothing sent)" }},
	{id: "nonce.token", section: "RFC 9449 §8", run: (*run).checkTokenNonce,
		does: func(*endpoints) string {
			return "read how the token endpoint asked for a DPoP nonce, if it did (nothing sent)"
		}},
	{id: "refuse.replayed_jti", section: "4.2", run: (*run).checkReplay,
		does: func(e *endpoints) string {
			return "POST " + e.token + ": the Session assertion that started the Session, again"
		}},
	{id: "refuse.array_aud", section: "4.2", run: assertionProbe(badArrayAud),
		does: func(e *endpoints) string {
			return "POST " + e.token + ": a Session assertion whose aud is [token_endpoint]"
		}},
	{id: "refuse.wrong_aud", section: "4.2", run: assertionProbe(badWrongAud),
		does: func(e *endpoints) string {
			return "POST " + e.token + ": a Session assertion whose aud is another Company's token endpoint"
		}},
	{id: "refuse.expired_assertion", section: "4.2", run: assertionProbe(badExpired),
		does: func(e *endpoints) string {
			return "POST " + e.token + ": a Session assertion that expired five minutes ago"
		}},
	{id: "refuse.foreign_iss", section: "4.2", run: assertionProbe(badForeignIss),
		does: func(e *endpoints) string {
			return "POST " + e.token + ": a Session assertion whose iss is not this client_id"
		}},
	{id: "refuse.wrong_nonce", section: "4.3", run: (*run).checkWrongNonce,
		does: func(e *endpoints) string {
			return "POST " + e.token + ": a Session request whose DPoP proof carries a nonce the Company never issued (when it asks for nonces)"
		}},
	{id: "session.renew", section: "4.2", run: (*run).checkRenew,
		does: func(e *endpoints) string {
			return "POST " + e.token + ": renew the main Session (session_id and fresh assertions)"
		}},
	{id: "api.read", section: "6", run: (*run).checkRead, when: needsAPI,
		does: describeRead},
	{id: "nonce.resource", section: "RFC 9449 §9", run: (*run).checkResourceNonce, when: needsAPI,
		does: func(*endpoints) string { return "read how that API asked for a DPoP nonce, if it did (nothing sent)" }},
	{id: "api.no_token", section: "6", run: (*run).checkNoToken, when: needsAPI,
		does: func(*endpoints) string { return onTarget + " with no Session Token and no proof" }},
	{id: "refuse.proof_htm", section: "4.3", run: proofProbe(badHTM), when: needsAPI,
		does: func(*endpoints) string { return onTarget + " " + withMainTok + " and a proof signed for POST" }},
	{id: "refuse.proof_htu", section: "4.3", run: proofProbe(badHTU), when: needsAPI,
		does: func(*endpoints) string { return onTarget + " " + withMainTok + " and a proof signed for another URL" }},
	{id: "refuse.proof_key", section: "4.3", run: proofProbe(badKey), when: needsAPI,
		does: func(*endpoints) string { return onTarget + " " + withMainTok + " and a proof signed by another key" }},
	{id: "refuse.no_proof", section: "4.3", run: proofProbe(badNoProof), when: needsAPI,
		does: func(*endpoints) string { return onTarget + " " + withMainTok + " and no DPoP proof" }},
	{id: "refuse.bearer_downgrade", section: "4.3", run: proofProbe(badBearer), when: needsAPI,
		does: func(*endpoints) string { return onTarget + " " + withMainTok + " as a Bearer token, without a proof" }},
	{id: "refuse.query_token", section: "4.3", run: (*run).checkQueryToken, when: needsAPI,
		does: func(e *endpoints) string {
			return "POST " + e.token + ": start a Session used for this probe alone; then " + onTarget + " with its token in ?access_token= and no Authorization header"
		}},
	{id: "refuse.other_resource", section: "4.3", run: (*run).checkOtherResource, when: needsResource,
		does: func(e *endpoints) string {
			return "GET an operation of an API with a resource, with a token issued for no resource (and POST " + e.token + " for one issued for it)"
		}},
	{id: "refuse.resource_elsewhere", section: "4.3", run: (*run).checkResourceElsewhere, when: needsResourceAndConversations,
		does: func(e *endpoints) string {
			return "GET " + e.conversations + "/{an unknown id}/events " + withMainTok + ", then with the token issued for the API's resource"
		}},
	{id: "refuse.mcp_bearer", section: "4.3", run: (*run).checkMCPBearer, when: needsMCPAndAPI,
		does: func(e *endpoints) string {
			return "POST " + e.token + ": a Bearer token for the MCP server (no proof, resource set); then " + onTarget + " with it"
		}},
	{id: "signin.device_scope", section: "4.4", run: (*run).checkDeviceScope, when: needsDevice,
		does: func(e *endpoints) string {
			return "POST " + e.device + ": a device authorization request for a scope the Company never listed"
		}},
	{id: "signin.revoke_unknown", section: "4.9", run: (*run).checkRevokeUnknown,
		does: func(e *endpoints) string { return "POST " + e.revocation + ": revoke a token the Company never issued" }},
	{id: "signin.mediated_no_token", section: "4.7", run: (*run).checkMediatedNoToken, when: needsMediated,
		does: func(e *endpoints) string {
			return "POST " + e.mediated + ": a sign-in with no credentials and no Session Token"
		}},
	{id: "conv.start", section: "7.3", run: (*run).checkConvStart, when: needsConversations,
		does: func(e *endpoints) string {
			return "POST " + e.conversations + ": start a conversation with one message saying it is a test"
		}},
	{id: "conv.resend_first", section: "7.3", run: (*run).checkConvResendFirst, when: needsConversations,
		does: func(e *endpoints) string { return "POST " + e.conversations + ": the same first message again" }},
	{id: "conv.resend", section: "7.3", run: (*run).checkConvResend, when: needsConversations,
		does: func(e *endpoints) string {
			return "POST " + e.conversations + "/{id}/messages twice with one message ID; GET " + e.conversations + "/{id}/events"
		}},
	{id: "conv.read", section: "7.5", run: (*run).checkConvRead, when: needsConversations,
		does: func(*endpoints) string { return "read the fields of that read of events (nothing sent)" }},
	{id: "conv.unknown", section: "7.13", run: (*run).checkConvUnknown, when: needsConversations,
		does: func(e *endpoints) string { return "GET " + e.conversations + "/{an unknown id}/events" }},
	{id: "conv.close", section: "7.12", run: (*run).checkConvClose, when: needsConversations,
		does: func(e *endpoints) string {
			return "POST " + e.conversations + "/{id}/close: close the test conversation"
		}},
}

func needsAPI(r *run) string {
	if len(r.ep.openapi) == 0 && r.ep.conversations == "" {
		return "the Company lists no OpenAPI API and no conversations: no resource to probe"
	}
	return ""
}

func needsResource(r *run) string {
	if len(r.ep.openapi) == 0 || r.ep.openapi[0].Resource == "" {
		return "no OpenAPI API of the Company has a resource (§4.3 \"Narrower tokens\"): one DPoP token works at all its services"
	}
	return ""
}

func needsResourceAndConversations(r *run) string {
	if why := needsResource(r); why != "" {
		return why
	}
	if r.ep.conversations == "" {
		return "the Company lists no conversations, the general service to send a resource's token to"
	}
	return ""
}

func needsMCPAndAPI(r *run) string {
	if len(r.ep.mcp) == 0 {
		return "the Company lists no MCP server"
	}
	return needsAPI(r)
}

func needsDevice(r *run) string {
	if r.ep.device == "" {
		return "the Company offers no Device Sign-In"
	}
	return ""
}

func needsMediated(r *run) string {
	if r.ep.mediated == "" {
		return "the Company offers no Mediated Sign-In"
	}
	return ""
}

func needsConversations(r *run) string {
	switch {
	case r.ep.conversations == "":
		return "the Company lists no poppy conversation protocol"
	case !r.c.opts.Conversations:
		return "conversations are probed only with --conversations (it starts a conversation at the Company)"
	}
	return ""
}

// describeRead says what api.read sends: GETs of the operations of the
// Company's OpenAPI documents, or a read of an unknown conversation.
func describeRead(e *endpoints) string {
	if len(e.openapi) == 0 {
		return "GET " + e.conversations + "/{an unknown id}/events " + withMainTok + " (the Company lists no OpenAPI API)"
	}
	docs := e.openapi[0].URL
	if len(e.openapi) > 1 {
		docs += " (then " + e.openapi[1].URL + ")"
	}
	return "GET the operations of " + docs + " without required parameters, " + withMainTok + ", until one answers (at most 5)"
}
