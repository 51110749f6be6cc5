package livecheck

// This file probes the sign-in endpoints (Poppy 0.1 §4.4-4.9) without
// signing in: each request is one no Company may grant.

import (
	"context"
	"net/http"
	"net/url"
)

// unknownScope is a scope no Company lists.
const unknownScope = "poppy-mcp-check-unknown-scope"

// checkDeviceScope asks for Device Sign-In with a scope the Company never
// listed. Poppy 0.1 §4.4: "Missing, unknown, or unavailable scopes are
// rejected with invalid_scope."
func (r *run) checkDeviceScope(ctx context.Context) outcome {
	x, err := r.send(ctx, r.ep.device, func(string) (*http.Request, error) {
		return r.clientRequest(r.ep.device, url.Values{"scope": {unknownScope}}, nil, "")
	}, false)
	if err != nil {
		return unavailable("the device authorization request", err)
	}
	_, code := errorCode(x)
	switch {
	case x.status/100 == 2:
		return fail("started a Device Sign-In for a scope it never listed; it must refuse it with invalid_scope")
	case code == "invalid_scope":
		return pass("a device authorization request for an unknown scope gets %s", statusLine(x))
	}
	return fail("answered a device authorization request for an unknown scope with %s; the error for it is invalid_scope", statusLine(x))
}

// checkRevokeUnknown revokes a token the Company never issued. RFC 7009
// §2.2: "The authorization server responds with HTTP status code 200 if the
// token has been revoked successfully or if the client submitted an
// invalid token."
func (r *run) checkRevokeUnknown(ctx context.Context) outcome {
	x, err := r.send(ctx, r.ep.revocation, func(string) (*http.Request, error) {
		form := url.Values{"token": {"poppy-mcp-check-" + randomID()}, "token_type_hint": {"refresh_token"}}
		return r.clientRequest(r.ep.revocation, form, nil, "")
	}, false)
	if err != nil {
		return unavailable("the revocation request", err)
	}
	if x.status == http.StatusOK {
		return pass("revoking a token it never issued gets HTTP 200, as RFC 7009 §2.2 says")
	}
	return fail("answered the revocation of a token it never issued with %s; RFC 7009 §2.2: invalid tokens get HTTP 200, not an error", statusLine(x))
}

// checkMediatedNoToken sends Mediated Sign-In a request with no Session
// Token and no credentials. Poppy 0.1 §4.7: the agent sends the fields
// "with its current Session Token"; §4.3: the Company checks it.
func (r *run) checkMediatedNoToken(ctx context.Context) outcome {
	body := []byte(`{"scope":` + jsonString(r.ep.mediatedScope) + `,"credentials":{}}`)
	x, err := r.call(ctx, call{url: r.ep.mediated, method: http.MethodPost, body: body})
	if err != nil {
		return unavailable("the sign-in request", err)
	}
	dpop, _ := challenge(x, "DPoP")
	switch {
	case x.status == http.StatusUnauthorized && dpop:
		return pass("a Mediated Sign-In request with no Session Token gets 401 with WWW-Authenticate: DPoP")
	case x.status == http.StatusUnauthorized:
		return fail("refused a Mediated Sign-In request with no Session Token with 401, but without a WWW-Authenticate: DPoP challenge")
	}
	return fail("took a Mediated Sign-In request with no Session Token (%s): it must refuse it with 401 before reading credentials", statusLine(x))
}
