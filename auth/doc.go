// Package auth is the Personal Agent's side of Poppy 0.1 §4: who the agent
// is, who the User is at each Company, and the Sessions and sign-ins through
// which it acts for them. Every request made for a Session rides on the one
// *http.Client auth gives that Session, which signs, retries and renews;
// nobody else builds an auth header.
//
// The parts, each in a file of its own:
//
//   - Identity (identity.go, keys.go, assertion.go): the agent's client_id,
//     its ES256 keys with rotation, the agent.json and jwks.json it publishes
//     (§4.1), and the assertions it signs: the client assertion, the Session
//     assertion of the JWT bearer grant (RFC 7523), the browser assertion
//     (§5).
//   - Agent (agent.go, held.go): what every Session shares, the identity, the
//     store, the transport, the DPoP nonces per origin and the 429 holds per
//     endpoint. Agent.Open starts or continues the Session of a User at a
//     Company, signed in when an Account Token is held (§4.2, §4.8).
//   - Session (session.go, transport.go, dpop.go, resource.go, site.go): one
//     User at one Company. Client signs every request with a fresh DPoP proof
//     (RFC 9449) and the Session Token, retries once on use_dpop_nonce,
//     renews on invalid_token, and honours Retry-After (§4.3). ResourceClient
//     and a Site's BearerClient are its narrower variants: a DPoP token for
//     one resource, a Bearer token for one MCP server. At gives the Session
//     at another domain of the same Company (§3.2).
//   - Sign-in (signin.go, device.go, direct.go, mediated.go): Device, Direct
//     and Mediated Sign-In (§4.5 to §4.7); each ends in a SignIn, which
//     Session.Hold keeps as the User's Account Token in place of the old one,
//     revoked.
//   - Account Tokens (account.go, held.go, lease.go): the token held for each
//     User at each Company, when it stands in for a new sign-in
//     (Session.SignInHeld), narrowing (Session.Narrow), sign-out with
//     revocation (Session.SignOut, §4.9), and the lease that keeps two
//     processes from sending one rotating token twice.
//   - Joining a browser (browser.go): the return_to rule and the page that
//     makes the agent's own browser post a fresh browser assertion (§5).
//
// Errors from the Company are *Error values with its OAuth error code; use
// errors.Is with the Err values (ErrSignInRequired, ErrUseDPoPNonce, ...).
// Secrets are held in Secret, which never prints: not in a log, an error or
// a result.
package auth
