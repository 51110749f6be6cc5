package livecheck

// This file sends token requests (Poppy 0.1 §4.2, RFC 7523) on the auth
// package's primitives (assertions, client assertions, DPoP proofs), reads
// token responses leniently enough to judge them, and starts the run's
// signed-out Sessions. Nothing here signs in.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
)

// session is a signed-out Session a run started.
type session struct {
	key       *auth.ProofKey // the DPoP key its tokens are bound to
	token     auth.Secret    // its latest Session Token
	id        string         // session_id
	assertion auth.Secret    // the Session assertion that started it
}

// grant is one JWT bearer grant (Poppy 0.1 §4.2).
type grant struct {
	// assertion signs the Session assertion of each attempt.
	assertion func() (auth.Secret, error)
	sessionID string
	resource  string
	// key signs the DPoP proof; nil sends none, asking for a Bearer token
	// (Poppy 0.1 §4.3 "Bearer tokens").
	key *auth.ProofKey
	// nonce is the proof's nonce, in place of the origin's latest; a grant
	// with one is not retried on use_dpop_nonce.
	nonce string
	// sent, when set, receives the assertion of the last attempt.
	sent *auth.Secret
}

// sessionAssertion returns a signer of fresh Session assertions for the run's User.
func (r *run) sessionAssertion() func() (auth.Secret, error) {
	return func() (auth.Secret, error) { return r.c.id.SessionAssertion(r.userID, r.ep.token) }
}

// postToken sends a JWT bearer grant to the token endpoint.
func (r *run) postToken(ctx context.Context, g grant) (*exchange, error) {
	return r.send(ctx, r.ep.token, func(latest string) (*http.Request, error) {
		as, err := g.assertion()
		if err != nil {
			return nil, err
		}
		if g.sent != nil {
			*g.sent = as
		}
		form := url.Values{"grant_type": {auth.GrantJWTBearer}, "assertion": {as.Reveal()}}
		if g.sessionID != "" {
			form.Set("session_id", g.sessionID) // Poppy 0.1 §4.2 "Renewing"
		}
		if g.resource != "" {
			form.Set("resource", g.resource) // Poppy 0.1 §4.3, RFC 8707
		}
		nonce := latest
		if g.nonce != "" {
			nonce = g.nonce
		}
		return r.clientRequest(r.ep.token, form, g.key, nonce)
	}, g.nonce == "")
}

// clientRequest is a form POST to one of the issuer's endpoints with the
// client assertion (Poppy 0.1 §4.1, RFC 7523 §2.2), and a DPoP proof signed
// by key when key is set.
func (r *run) clientRequest(endpoint string, form url.Values, key *auth.ProofKey, nonce string) (*http.Request, error) {
	ca, err := r.c.id.ClientAssertion(r.ep.token)
	if err != nil {
		return nil, err
	}
	form.Set("client_id", r.c.id.ClientID())
	form.Set("client_assertion_type", auth.ClientAssertionType)
	form.Set("client_assertion", ca.Reveal())
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("livecheck: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if key != nil {
		// Poppy 0.1 §4.3: the agent "signs a new proof for every request, including token requests"
		p, err := key.Proof(http.MethodPost, endpoint, auth.Secret{}, nonce)
		if err != nil {
			return nil, err
		}
		req.Header.Set("DPoP", p)
	}
	return req, nil
}

// tokenReply is a token response (Poppy 0.1 §4.2) as the probes judge it:
// each field as sent, with whether it was there at all.
type tokenReply struct {
	accessToken  string
	tokenType    string
	expiresIn    float64
	hasExpiresIn bool
	sessionID    string
	hasSessionID bool
	signedIn     *bool
	scope        string
}

// parseTokenReply reads a token response body. It fails only when the
// body is not a JSON object with an access_token string; a field of the
// wrong type is read as missing, for the checks to report.
func parseTokenReply(body []byte) (tokenReply, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return tokenReply{}, errors.New("the body is not a JSON object")
	}
	var t tokenReply
	if json.Unmarshal(m["access_token"], &t.accessToken) != nil || t.accessToken == "" {
		return tokenReply{}, errors.New("it has no access_token")
	}
	_ = json.Unmarshal(m["token_type"], &t.tokenType)
	t.hasExpiresIn = json.Unmarshal(m["expires_in"], &t.expiresIn) == nil && m["expires_in"] != nil
	t.hasSessionID = json.Unmarshal(m["session_id"], &t.sessionID) == nil && t.sessionID != ""
	var b bool
	if json.Unmarshal(m["signed_in"], &b) == nil && m["signed_in"] != nil {
		t.signedIn = &b
	}
	_ = json.Unmarshal(m["scope"], &t.scope)
	return t, nil
}

// issued reads an answer that should hold a Session Token: a 200 with a
// JSON token response. It returns an error naming what came instead.
func issued(x *exchange) (tokenReply, error) {
	if x.status != http.StatusOK {
		if _, code := errorCode(x); code != "" {
			return tokenReply{}, fmt.Errorf("HTTP %d, %s", x.status, code)
		}
		return tokenReply{}, fmt.Errorf("HTTP %d", x.status)
	}
	if mt, _, _ := mime.ParseMediaType(x.header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return tokenReply{}, errors.New("HTTP 200 but not JSON")
	}
	t, err := parseTokenReply(x.body)
	if err != nil {
		return tokenReply{}, fmt.Errorf("HTTP 200, but %v", err)
	}
	return t, nil
}

// startSession starts a signed-out Session with a DPoP key of its own.
func (r *run) startSession(ctx context.Context) (*session, *exchange, tokenReply, error) {
	k, err := auth.GenerateKey()
	if err != nil {
		return nil, nil, tokenReply{}, err
	}
	s := &session{key: auth.NewProofKey(k)}
	x, err := r.postToken(ctx, grant{assertion: r.sessionAssertion(), key: s.key, sent: &s.assertion})
	if err != nil {
		return nil, nil, tokenReply{}, err
	}
	t, err := issued(x)
	if err != nil {
		return nil, x, tokenReply{}, err
	}
	s.token, s.id = auth.NewSecret(t.accessToken), t.sessionID
	return s, x, t, nil
}

// resourceToken returns a DPoP Session Token of the main Session issued
// for resource (Poppy 0.1 §4.3 "Narrower tokens"), asking once per run.
func (r *run) resourceToken(ctx context.Context, resource string) (auth.Secret, error) {
	if tok, ok := r.resTok[resource]; ok {
		return tok, nil
	}
	x, err := r.postToken(ctx, grant{assertion: r.sessionAssertion(), sessionID: r.main.id, resource: resource, key: r.main.key})
	if err != nil {
		return auth.Secret{}, err
	}
	t, err := issued(x)
	if err != nil {
		return auth.Secret{}, fmt.Errorf("the token endpoint issued no token for resource %s: %v", resource, err)
	}
	tok := auth.NewSecret(t.accessToken)
	r.resTok[resource] = tok
	return tok, nil
}

// judgeTokenRefusal judges the answer to a token request the Company must
// refuse with the error code want (Poppy 0.1 §4.2: "Errors use the OAuth
// error response"). Issuing a token is a security bug.
func judgeTokenRefusal(x *exchange, want, what string) outcome {
	_, code := errorCode(x)
	switch {
	case x.status == http.StatusOK:
		if _, err := issued(x); err == nil {
			return breach("issued a Session Token for %s", what)
		}
		return fail("answered %s with HTTP 200 and no token: it must refuse it with %s", what, want)
	case code == want && x.status/100 == 4:
		return pass("refused %s: HTTP %d, %s", what, x.status, code)
	case code != "" && x.status/100 == 4:
		return fail("refused %s, but with %s (HTTP %d); the error for it is %s", what, code, x.status, want)
	}
	return fail("answered %s with HTTP %d and no OAuth error; it must refuse it with %s", what, x.status, want)
}
