package livecheck

// This file probes Sessions (Poppy 0.1 §4.2): one starts and its token
// response has what §4.2 lists, renewal keeps its session_id, DPoP nonces
// behave as RFC 9449 §8 says when the Company asks for them, and the token
// endpoint refuses every assertion §4.2 says it must.

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
)

// foreign is a host no Company has: wrong aud and iss values name it.
const foreign = "https://poppy-mcp-check.invalid"

// checkStart starts the main Session and checks the token response.
// Without a Session nothing else can be probed: the run stops.
func (r *run) checkStart(ctx context.Context) outcome {
	s, x, t, err := r.startSession(ctx)
	if err != nil {
		what := "start a Session at " + r.ep.token
		if x != nil && strings.Contains(err.Error(), "invalid_client") {
			err = fmt.Errorf("%v: the Company refused the client; it must be able to fetch %s and its jwks_uri (Poppy 0.1 §4.1)", err, r.c.id.ClientID())
		}
		r.fatal = &Error{What: what, Err: err}
		return fail("could not %s: %v", what, err)
	}
	r.main, r.startX = s, x
	if bad := startProblems(t); len(bad) > 0 {
		return fail("a Session started, but its token response is wrong: %s", strings.Join(bad, "; "))
	}
	return pass("a Session starts: HTTP 200, token_type DPoP, expires_in %.0f, a session_id, signed_in false, no scope", t.expiresIn)
}

// startProblems lists what is wrong with the token response that started
// a signed-out Session (Poppy 0.1 §4.2).
func startProblems(t tokenReply) []string {
	var bad []string
	// Poppy 0.1 §4.2: "token_type is DPoP, or Bearer for a token requested without a proof"
	if !strings.EqualFold(t.tokenType, "DPoP") {
		bad = append(bad, fmt.Sprintf("token_type is %s, not DPoP", quoted(t.tokenType)))
	}
	// Poppy 0.1 §4.2: "The Company chooses the value, and it MUST be greater than 0."
	if !t.hasExpiresIn || t.expiresIn <= 0 {
		bad = append(bad, "expires_in is missing or not greater than 0")
	}
	if !t.hasSessionID {
		bad = append(bad, "session_id is missing")
	}
	// Poppy 0.1 §4.2: "signed_in says whether the Session is signed in"; a new Session starts signed out.
	if t.signedIn == nil || *t.signedIn {
		bad = append(bad, "signed_in is not false")
	}
	// Poppy 0.1 §4.2: "A signed-out token has none."
	if strings.TrimSpace(t.scope) != "" {
		bad = append(bad, "scope is not empty, though a signed-out token has none")
	}
	return bad
}

// quoted shows a Company's short value, cleaned.
func quoted(s string) string {
	if s == "" {
		return "missing"
	}
	if len(s) > 40 || strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c > 0x7e }) {
		return "an unreadable value"
	}
	return fmt.Sprintf("%q", s)
}

// checkNoStore checks Cache-Control on the token response that started the Session.
func (r *run) checkNoStore(context.Context) outcome {
	cc := strings.ToLower(r.startX.header.Get("Cache-Control"))
	// Poppy 0.1 §4.2's response carries "Cache-Control: no-store"; RFC 6749 §5.1: the server "MUST include the HTTP "Cache-Control" response header field with a value of "no-store""
	if slices.Contains(strings.FieldsFunc(cc, func(c rune) bool { return c == ',' || c == ' ' }), "no-store") {
		return pass("the token response has Cache-Control: no-store")
	}
	return fail("the token response has no Cache-Control: no-store, so a cache on the way may keep the Session Token (RFC 6749 §5.1: MUST)")
}

// checkTokenNonce judges how the token endpoint asked for a DPoP nonce.
func (r *run) checkTokenNonce(context.Context) outcome {
	return r.judgeNonce(r.atToken, false, origin(r.ep.token), "the token endpoint")
}

// atToken reports whether a use_dpop_nonce answer came from the token endpoint.
func (r *run) atToken(e nonceEvent) bool { return e.endpoint == r.tokenKey() }

func (r *run) tokenKey() string {
	u, err := url.Parse(r.ep.token)
	if err != nil {
		return r.ep.token
	}
	return retryafter.Endpoint(u)
}

// judgeNonce judges the first use_dpop_nonce answer that match picks, from
// origin o. At a resource (atResource), the code must come in a DPoP
// challenge (RFC 9449 §9).
func (r *run) judgeNonce(match func(nonceEvent) bool, atResource bool, o, where string) outcome {
	i := slices.IndexFunc(r.nonceLog, match)
	if i < 0 {
		if _, ok := r.nonces[o]; ok {
			return skip("%s never answered use_dpop_nonce: the proofs carried the nonce it had sent in DPoP-Nonce, or it needs none", where)
		}
		return skip("%s does not use DPoP nonces (RFC 9449 §8 lets it)", where)
	}
	e := r.nonceLog[i]
	switch {
	case !e.named:
		// RFC 9449 §8: the server "provides a nonce value ... in the DPoP-Nonce HTTP header"
		return fail("%s answered use_dpop_nonce without a DPoP-Nonce header, so no client can comply", where)
	case atResource && !e.inChallenge:
		// RFC 9449 §9: a resource server answers with WWW-Authenticate: DPoP error="use_dpop_nonce"
		return fail("%s answered use_dpop_nonce outside a WWW-Authenticate: DPoP challenge", where)
	case e.after == nil:
		return skip("%s asked for a DPoP nonce; the retry with it was not sent", where)
	}
	if _, code := errorCode(e.after); code == "use_dpop_nonce" {
		return fail("%s asked for a DPoP nonce, then refused the proof that carried it with use_dpop_nonce again", where)
	}
	return pass("%s asks for a DPoP nonce with use_dpop_nonce and DPoP-Nonce, and takes the proof that carries it", where)
}

// checkReplay sends the assertion that started the main Session again.
// Poppy 0.1 §4.2: "The Company rejects one it has already seen".
func (r *run) checkReplay(ctx context.Context) outcome {
	as := r.main.assertion
	x, err := r.postToken(ctx, grant{assertion: func() (auth.Secret, error) { return as, nil }, key: r.main.key})
	if err != nil {
		return unavailable("the replayed assertion", err)
	}
	return judgeTokenRefusal(x, "invalid_grant", "a Session assertion it had already accepted (same jti)")
}

// badAssertion is one way to get a Session assertion wrong.
type badAssertion struct {
	what   string
	claims func(r *run) auth.ProbeClaims
}

var (
	badArrayAud = badAssertion{"a Session assertion whose aud is an array", func(r *run) auth.ProbeClaims {
		// Poppy 0.1 §4.2: aud is the token_endpoint "as a single string rather than an array"
		return auth.ProbeClaims{Subject: r.userID, Audience: []string{r.ep.token}}
	}}
	badWrongAud = badAssertion{"a Session assertion for another Company's token endpoint", func(r *run) auth.ProbeClaims {
		return auth.ProbeClaims{Subject: r.userID, Audience: foreign + "/oauth/token"}
	}}
	badExpired = badAssertion{"a Session assertion that expired five minutes ago", func(r *run) auth.ProbeClaims {
		// Poppy 0.1 §4.2: "The assertion is short-lived"
		iat := time.Now().Add(-10 * time.Minute)
		return auth.ProbeClaims{Subject: r.userID, Audience: r.ep.token, IssuedAt: iat, Expires: iat.Add(5 * time.Minute)}
	}}
	badForeignIss = badAssertion{"a Session assertion whose iss is not the client", func(r *run) auth.ProbeClaims {
		// Poppy 0.1 §4.2: the Company "checks that the assertion's iss is the authenticated client_id"
		return auth.ProbeClaims{Issuer: foreign + "/agent.json", Subject: r.userID, Audience: r.ep.token}
	}}
)

// assertionProbe sends one wrong Session assertion, with a valid client
// assertion and proof: the Company must refuse it with invalid_grant.
func assertionProbe(b badAssertion) func(r *run, ctx context.Context) outcome {
	return func(r *run, ctx context.Context) outcome {
		sign := func() (auth.Secret, error) { return r.c.id.SignProbeAssertion(b.claims(r)) }
		x, err := r.postToken(ctx, grant{assertion: sign, key: r.main.key})
		if err != nil {
			return unavailable(b.what, err)
		}
		return judgeTokenRefusal(x, "invalid_grant", b.what)
	}
}

// madeUpNonce is a nonce no Company issued.
const madeUpNonce = "poppy-mcp-check-made-up-nonce"

// checkWrongNonce sends a proof with a nonce the Company never issued.
// RFC 9449 §4.3: the server checks "the nonce claim matches the
// server-provided nonce value"; §8: it answers use_dpop_nonce.
func (r *run) checkWrongNonce(ctx context.Context) outcome {
	if !slices.ContainsFunc(r.nonceLog, func(e nonceEvent) bool { return r.atToken(e) && e.named }) {
		return skip("the token endpoint did not ask for a DPoP nonce, so any nonce may do")
	}
	x, err := r.postToken(ctx, grant{assertion: r.sessionAssertion(), key: r.main.key, nonce: madeUpNonce})
	if err != nil {
		return unavailable("the proof with a made-up nonce", err)
	}
	return judgeTokenRefusal(x, "use_dpop_nonce", "a DPoP proof whose nonce it never issued")
}

// checkRenew renews the main Session; the token it returns is the
// Session's from now on (Poppy 0.1 §4.3: "it MUST use the new token from then on").
func (r *run) checkRenew(ctx context.Context) outcome {
	if r.main.id == "" {
		return skip("the Session has no session_id to renew it with")
	}
	x, err := r.postToken(ctx, grant{assertion: r.sessionAssertion(), sessionID: r.main.id, key: r.main.key})
	if err != nil {
		return unavailable("the renewal", err)
	}
	t, err := issued(x)
	if err != nil {
		return fail("renewing the Session (session_id and fresh assertions) was refused: %v", err)
	}
	r.main.token = auth.NewSecret(t.accessToken)
	switch {
	case !t.hasSessionID:
		return fail("the renewal's token response has no session_id (Poppy 0.1 §4.2 lists it in every token response)")
	case t.sessionID != r.main.id:
		// Poppy 0.1 §4.2: the Company "returns a new signed-out Session Token for it"
		return fail("the renewal returned another session_id than the Session's: a renewal keeps the Session")
	}
	return pass("renewing the Session keeps its session_id")
}

// statusLine is "HTTP n" with the error code of the answer, if any.
func statusLine(x *exchange) string {
	if _, code := errorCode(x); code != "" {
		return fmt.Sprintf("HTTP %d, %s", x.status, code)
	}
	return fmt.Sprintf("HTTP %d", x.status)
}
