// Package published checks the agent's published identity (Poppy 0.1 §4.1) the way
// a Company reads it: agent.json fetched at the client_id URL and jwks.json
// at its jwks_uri, over HTTPS through the network guard, without following
// redirects (a Company fetches client_id itself, and "client_id MUST equal
// the URL the document was fetched from"), and compares them with what the
// state holds: metadata field by field, keys by their RFC 7638 thumbprint
// and key ID. `poppy-mcp status` and `poppy-mcp doctor` both report it.
package published

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
)

// maxIdentityDocument bounds a fetched agent.json or jwks.json.
const maxIdentityDocument = 64 << 10

// Doc is what was found at one of the identity's URLs.
type Doc struct {
	URL string `json:"url"`
	// OK: reachable, and what a Company reads there matches the state.
	OK bool `json:"ok"`
	// Problems stop Companies from accepting the identity, or show that
	// the published document is not the one the state holds.
	Problems []string `json:"problems,omitempty"`
	// Notes are harmless differences worth knowing.
	Notes []string `json:"notes,omitempty"`
}

// Result is the published identity compared with the state's.
type Result struct {
	AgentJSON Doc `json:"agent_json"`
	JWKS      Doc `json:"jwks_json"`
}

// OK reports whether both documents match.
func (p Result) OK() bool { return p.AgentJSON.OK && p.JWKS.OK }

// Check fetches both documents through rt and compares them with id's.
func Check(ctx context.Context, rt http.RoundTripper, id *auth.Identity) Result {
	md := id.Metadata()
	agent := Doc{URL: md.ClientID}
	if body, err := fetchIdentityDoc(ctx, rt, md.ClientID); err != nil {
		agent.Problems = []string{err.Error()}
	} else {
		agent.Problems, agent.Notes = compareAgentJSON(body, md)
	}
	keys := Doc{URL: md.JWKSURI}
	if body, err := fetchIdentityDoc(ctx, rt, md.JWKSURI); err != nil {
		keys.Problems = []string{err.Error()}
	} else {
		keys.Problems, keys.Notes = compareJWKS(body, id.JWKS(), id.CurrentKeyID())
	}
	agent.OK, keys.OK = len(agent.Problems) == 0, len(keys.Problems) == 0
	return Result{AgentJSON: agent, JWKS: keys}
}

// fetchIdentityDoc GETs one document as a Company would.
func fetchIdentityDoc(ctx context.Context, rt http.RoundTripper, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	c := &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("not reachable: %v", netguard.Cause(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("answers HTTP %d, a redirect to %q: Companies do not follow it; serve the file at this URL itself",
			resp.StatusCode, resp.Header.Get("Location"))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answers HTTP %d: is the file published there?", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return nil, fmt.Errorf("is served as %q: Companies want application/json (name the file .json)", resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIdentityDocument+1))
	if err != nil {
		return nil, fmt.Errorf("could not be read: %v", err)
	}
	if len(body) > maxIdentityDocument {
		return nil, fmt.Errorf("is larger than %d KiB", maxIdentityDocument>>10)
	}
	return body, nil
}

// compareAgentJSON compares a published agent.json with the state's
// metadata, field by field.
func compareAgentJSON(body []byte, want auth.ClientMetadata) (problems, notes []string) {
	var got auth.ClientMetadata
	if err := json.Unmarshal(body, &got); err != nil {
		return []string{"is not a client metadata document: " + err.Error()}, nil
	}
	differ := func(field string, got, want any) {
		problems = append(problems, fmt.Sprintf("%s is %s there, %s here", field, show(got), show(want)))
	}
	if got.ClientID != want.ClientID {
		// Poppy 0.1 §4.1: "client_id MUST equal the URL the document was fetched from."
		differ("client_id", got.ClientID, want.ClientID)
	}
	if got.JWKSURI != want.JWKSURI {
		differ("jwks_uri", got.JWKSURI, want.JWKSURI)
	}
	if got.TokenEndpointAuthMethod != "private_key_jwt" {
		// Poppy 0.1 §4.1: the agent authenticates "with a client assertion ... (private_key_jwt, RFC 7523)".
		differ("token_endpoint_auth_method", got.TokenEndpointAuthMethod, "private_key_jwt")
	}
	if !sameSet(got.RedirectURIs, want.RedirectURIs) {
		differ("redirect_uris", got.RedirectURIs, want.RedirectURIs)
	}
	if got.ClientName != want.ClientName {
		notes = append(notes, fmt.Sprintf("client_name is %s there, %s here: Companies show the published one", show(got.ClientName), show(want.ClientName)))
	}
	if got.LogoURI != want.LogoURI {
		notes = append(notes, fmt.Sprintf("logo_uri is %s there, %s here", show(got.LogoURI), show(want.LogoURI)))
	}
	if !maps.Equal(got.Extensions, want.Extensions) {
		notes = append(notes, fmt.Sprintf("extensions are %s there, %s here", show(got.Extensions), show(want.Extensions)))
	}
	return problems, notes
}

// show quotes a value for a sentence.
func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// privateJWKMembers are the members only a private or symmetric JWK has.
var privateJWKMembers = []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"}

// compareJWKS compares a published key set with the state's public keys:
// the current signing key must be there under its key ID, or Companies
// refuse every assertion it signs; a retired key still within its seven
// days should be, for a poppy-mcp still running with it.
func compareJWKS(body []byte, want jose.JSONWebKeySet, current string) (problems, notes []string) {
	published, problems, err := readJWKS(body)
	if err != nil {
		return []string{"is not a JWK set: " + err.Error()}, nil
	}
	for _, k := range want.Keys {
		role := "retired"
		if k.KeyID == current {
			role = "signing"
		}
		kid, ok := published[thumbprint(k)]
		delete(published, thumbprint(k))
		switch {
		case ok && kid == k.KeyID:
		case ok:
			problems = append(problems, fmt.Sprintf("has the %s key %s under key ID %q: Companies look keys up by ID", role, k.KeyID, kid))
		case k.KeyID == current:
			problems = append(problems, fmt.Sprintf("lacks the signing key %s: Companies refuse every assertion it signs until this jwks.json is published", current))
		default:
			problems = append(problems, fmt.Sprintf("lacks the retired key %s, which stays published for seven days after `init --rotate` for a poppy-mcp still running with it", k.KeyID))
		}
	}
	for _, kid := range slices.Sorted(maps.Values(published)) {
		notes = append(notes, fmt.Sprintf("also has key %q, which this state does not hold (an older key, or another machine's)", kid))
	}
	return problems, notes
}

// readJWKS reads a published key set: its public keys' key IDs by
// thumbprint, and the problems of the keys that are private or no JWK.
func readJWKS(body []byte) (published map[string]string, problems []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, nil, err
	}
	published = map[string]string{} // thumbprint -> kid
	for i, raw := range set.Keys {
		var members map[string]any
		_ = json.Unmarshal(raw, &members)
		for _, m := range privateJWKMembers {
			if _, ok := members[m]; ok {
				// Poppy 0.1 §4.1: "The key set contains only public keys."
				problems = append(problems, fmt.Sprintf("key %d is a PRIVATE key (member %q): take it down now, then make a new key with `poppy-mcp init --rotate`", i, m))
			}
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			problems = append(problems, fmt.Sprintf("key %d is not a JWK: %v", i, err))
			continue
		}
		published[thumbprint(k)] = k.KeyID
	}
	return published, problems, nil
}

// thumbprint is a key's RFC 7638 SHA-256 thumbprint, or "" for a key
// that has none.
func thumbprint(k jose.JSONWebKey) string {
	b, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
