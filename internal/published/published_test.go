package published

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
)

// testIdentity is an identity in memory, with one rotation behind it.
func testIdentity(t testing.TB) *auth.Identity {
	t.Helper()
	id, err := auth.NewIdentity(context.Background(), "https://agent.example/agent.json", &auth.IdentityOptions{
		RedirectURIs: []string{"https://agent.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCompareIdentityDocuments: the published documents compared with the
// state's, field by field and key by key.
func TestCompareIdentityDocuments(t *testing.T) {
	id := testIdentity(t)
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	if p, n := compareAgentJSON(agentJSON, id.Metadata()); len(p)+len(n) != 0 {
		t.Errorf("the same agent.json: %q %q", p, n)
	}
	if p, n := compareJWKS(jwks, id.JWKS(), id.CurrentKeyID()); len(p)+len(n) != 0 {
		t.Errorf("the same jwks.json: %q %q", p, n)
	}
	var md map[string]any
	json.Unmarshal(agentJSON, &md)
	md["client_name"], md["redirect_uris"] = "Someone", []string{}
	changed, _ := json.Marshal(md)
	if p, n := compareAgentJSON(changed, id.Metadata()); len(p) != 1 || !strings.Contains(p[0], "redirect_uris") || len(n) != 1 {
		t.Errorf("another name and no redirect_uris: %q %q", p, n)
	}
	set := id.JWKS()
	old := set.Keys[1]
	set.Keys = set.Keys[1:] // the retired key only
	onlyOld, _ := json.Marshal(set)
	if p, _ := compareJWKS(onlyOld, id.JWKS(), id.CurrentKeyID()); len(p) != 1 || !strings.Contains(p[0], "lacks the signing key "+id.CurrentKeyID()) {
		t.Errorf("a jwks.json without the signing key: %q", p)
	}
	old.KeyID = "renamed"
	set.Keys = append(id.JWKS().Keys[:1], old)
	renamed, _ := json.Marshal(set)
	if p, n := compareJWKS(renamed, id.JWKS(), id.CurrentKeyID()); len(p) != 1 || !strings.Contains(p[0], "retired") || len(n) != 0 {
		t.Errorf("the retired key under another ID: %q %q", p, n)
	}
	private := bytes.Replace(jwks, []byte(`"kty"`), []byte(`"d":"AAAA","kty"`), 1)
	if p, _ := compareJWKS(private, id.JWKS(), id.CurrentKeyID()); len(p) == 0 || !strings.Contains(strings.Join(p, " "), "PRIVATE") {
		t.Errorf("a published private key: %q", p)
	}
}

// FuzzCompareIdentityDocuments: whatever a host serves at the identity's
// URLs, comparing it neither panics nor calls a mismatch a match.
func FuzzCompareIdentityDocuments(f *testing.F) {
	id := testIdentity(f)
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	for _, seed := range [][]byte{agentJSON, jwks, []byte(`{"keys":[{"kty":"EC"}]}`), []byte(`{"keys":null}`), []byte(`[]`), []byte(`{"client_id":1}`)} {
		f.Add(seed)
	}
	md, keys, current := id.Metadata(), id.JWKS(), id.CurrentKeyID()
	f.Fuzz(func(t *testing.T, body []byte) {
		p, _ := compareAgentJSON(body, md)
		var got auth.ClientMetadata
		if len(p) == 0 && (json.Unmarshal(body, &got) != nil || got.ClientID != md.ClientID || got.JWKSURI != md.JWKSURI) {
			t.Errorf("agent.json %q taken for the state's", body)
		}
		if p, _ := compareJWKS(body, keys, current); len(p) == 0 && !bytes.Contains(body, []byte(current)) {
			t.Errorf("jwks.json %q without the signing key taken for the state's", body)
		}
	})
}
