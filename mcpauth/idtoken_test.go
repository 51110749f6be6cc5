package mcpauth_test

// These tests show each check of the ID token that Login makes (OpenID
// Connect Core 1.0 §3.1.3.7) being made: the issuer, trusted, signs an ID
// token that breaks one rule (internal/oidctest's FlawIDTokens), and the
// browser is signed in as no one, with a reason that names the rule.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// signInWith signs alice's browser in to open a page of hers while the
// issuer's ID tokens have the flaws f, and returns the status and body of
// where it ended and whether the browser got a session cookie.
func signInWith(t *testing.T, f oidctest.IDTokenFlaws) (int, string, bool) {
	t.Helper()
	d := newDeployment(t, nil)
	p, _ := d.withPages(t, "")
	page, _ := p.OpenForUser((mcpauth.User{Issuer: d.idp.Issuer(), Subject: "alice"}).Key(), thePage, 0)
	d.idp.FlawIDTokens(f)
	alice := d.browser("alice")
	code, body := open(t, alice, page)
	return code, body, cookieNamed(alice, mcpauth.SessionCookie) != nil
}

// refused checks that a sign-in ended refused, for the reason want.
func refused(t *testing.T, f oidctest.IDTokenFlaws, want string) {
	t.Helper()
	code, body, signedIn := signInWith(t, f)
	if code != http.StatusForbidden || signedIn || strings.Contains(body, "the page") || !strings.Contains(body, want) {
		t.Errorf("ID token with %+v: %d, signed in %v, page:\n%s\nwant 403 saying %q", f, code, signedIn, body, want)
	}
}

// TestIDTokenForAnotherClient: OIDC Core §3.1.3.7 (3), "The Client MUST
// validate that the aud (audience) Claim contains its client_id value".
// The token's azp is still our client ID, so only that check refuses it.
func TestIDTokenForAnotherClient(t *testing.T) {
	refused(t, oidctest.IDTokenFlaws{Audience: []string{"another-client"}}, "for another client")
}

// TestIDTokenOfSeveralAudiencesWithoutAZP: §3.1.3.7 (4), "If the ID Token
// contains multiple audiences, the Client SHOULD verify that an azp Claim
// is present". Ours requires it.
func TestIDTokenOfSeveralAudiencesWithoutAZP(t *testing.T) {
	refused(t, oidctest.IDTokenFlaws{Audience: []string{pagesClient, "another-client"}, NoAuthorizedParty: true},
		"issued to another party")
}

// TestIDTokenAuthorizedToAnotherParty: §3.1.3.7 (5), "If an azp
// (authorized party) Claim is present, the Client SHOULD verify that its
// client_id is the Claim Value", with one audience and with several.
func TestIDTokenAuthorizedToAnotherParty(t *testing.T) {
	refused(t, oidctest.IDTokenFlaws{AuthorizedParty: "another-client"}, "issued to another party")
	refused(t, oidctest.IDTokenFlaws{Audience: []string{pagesClient, "another-client"}, AuthorizedParty: "another-client"},
		"issued to another party")
}

// TestIDTokenOfSeveralAudiencesForUs: a token of several audiences whose
// azp is our client ID is ours (§3.1.3.7 (4), (5)): the checks above
// refuse only what they should.
func TestIDTokenOfSeveralAudiencesForUs(t *testing.T) {
	if code, body, signedIn := signInWith(t, oidctest.IDTokenFlaws{Audience: []string{"another-client", pagesClient}}); code != 200 ||
		body != "the page" || !signedIn {
		t.Errorf("a token for us and another audience, azp us: %d, signed in %v:\n%s", code, signedIn, body)
	}
}

// TestIDTokenOfAnotherSignIn: §3.1.3.7 (11), "If a nonce value was sent in
// the Authentication Request, a nonce Claim MUST be present and its value
// checked to verify that it is the same value as the one that was sent".
func TestIDTokenOfAnotherSignIn(t *testing.T) {
	refused(t, oidctest.IDTokenFlaws{Nonce: "the-nonce-of-another-sign-in"}, "not for this sign-in")
}

// TestIDTokenWithoutNonce: §3.1.3.7 (11), "a nonce Claim MUST be present":
// a token that leaves it out is refused as one of another sign-in.
func TestIDTokenWithoutNonce(t *testing.T) {
	refused(t, oidctest.IDTokenFlaws{NoNonce: true}, "not for this sign-in")
}
