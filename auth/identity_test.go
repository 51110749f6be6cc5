package auth

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
)

const testClientID = "https://agent.example/agent.json"

func newTestIdentity(t *testing.T, opts *IdentityOptions) *Identity {
	t.Helper()
	id, err := NewIdentity(context.Background(), testClientID, opts)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestAgentJSON(t *testing.T) {
	id := newTestIdentity(t, &IdentityOptions{
		ClientName:   "Example Agent",
		RedirectURIs: []string{"https://agent.example/oauth/callback"},
		Extensions:   map[string]string{"operations": "1"},
	})
	b, err := id.AgentJSON()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/agent.json", b)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// Poppy 0.1 §4.1 example document, without logo_uri.
	want := map[string]any{
		"client_id":                  "https://agent.example/agent.json",
		"client_name":                "Example Agent",
		"jwks_uri":                   "https://agent.example/jwks.json",
		"redirect_uris":              []any{"https://agent.example/oauth/callback"},
		"token_endpoint_auth_method": "private_key_jwt",
		"extensions":                 map[string]any{"operations": map[string]any{"version": "1"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("agent.json (-want +got):\n%s", d)
	}
	// Defaults: extensions is an empty object, redirect_uris an empty list.
	b, _ = newTestIdentity(t, nil).AgentJSON()
	if !strings.Contains(string(b), `"extensions": {}`) || !strings.Contains(string(b), `"redirect_uris": []`) {
		t.Errorf("defaults: %s", b)
	}
}

func TestIdentityValidation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		clientID string
		opts     IdentityOptions
	}{
		{"http client_id", "http://agent.example/agent.json", IdentityOptions{}},
		{"relative client_id", "/agent.json", IdentityOptions{}},
		{"jwks on another host", testClientID, IdentityOptions{JWKSURI: "https://cdn.example/jwks.json"}},
		{"http jwks", testClientID, IdentityOptions{JWKSURI: "http://agent.example/jwks.json"}},
		{"redirect elsewhere", testClientID, IdentityOptions{RedirectURIs: []string{"https://evil.example/cb"}}},
		{"http redirect", testClientID, IdentityOptions{RedirectURIs: []string{"http://agent.example/cb"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewIdentity(context.Background(), tc.clientID, &tc.opts); err == nil || !strings.HasPrefix(err.Error(), "auth: ") {
				t.Errorf("err = %v, want an auth: error", err)
			}
		})
	}
}

func TestJWKSHasOnlyPublicKeys(t *testing.T) {
	id := newTestIdentity(t, nil)
	b, err := id.JWKSJSON()
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 {
		t.Fatalf("keys = %d, want 1", len(set.Keys))
	}
	k := set.Keys[0]
	if _, ok := k["d"]; ok {
		t.Error("jwks.json has a private key")
	}
	if k["kid"] != id.CurrentKeyID() || k["use"] != "sig" || k["alg"] != "ES256" || k["kty"] != "EC" || k["crv"] != "P-256" {
		t.Errorf("key = %v", k)
	}
}

func TestRotation(t *testing.T) {
	clock := newClock()
	store := teststore.Open(t)
	id := newTestIdentity(t, &IdentityOptions{Store: store})
	id.now = clock.Now
	old := id.CurrentKeyID()
	oldPub := id.JWKS().Keys[0]
	if err := id.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if id.CurrentKeyID() == old {
		t.Fatal("Rotate kept the key")
	}
	// New assertions use the new key; the old one is still published.
	as, err := id.ClientAssertion("https://auth.example.com/oauth/token")
	if err != nil {
		t.Fatal(err)
	}
	cur := id.JWKS()
	if kids := keyIDs(cur); len(kids) != 2 || kids[0] != id.CurrentKeyID() || kids[1] != old {
		t.Fatalf("after rotation kids = %v", kids)
	}
	hdr, _ := verifyJWS(t, as.Reveal(), cur.Keys[0].Key.(*ecdsa.PublicKey))
	if hdr.KeyID != id.CurrentKeyID() {
		t.Errorf("assertion kid = %s, want the new key", hdr.KeyID)
	}
	// A restart keeps both.
	id2 := newTestIdentity(t, &IdentityOptions{Store: store})
	id2.now = clock.Now
	if d := cmp.Diff(keyIDs(cur), keyIDs(id2.JWKS())); d != "" {
		t.Errorf("reloaded kids differ: %s", d)
	}
	// After the retire time the old key is gone.
	clock.Advance(DefaultRetireAfter + time.Second)
	if kids := keyIDs(id.JWKS()); len(kids) != 1 || kids[0] != id.CurrentKeyID() {
		t.Errorf("after retire time kids = %v", kids)
	}
	if !oldPub.IsPublic() {
		t.Error("published key is not public")
	}
}

func keyIDs(set jose.JSONWebKeySet) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

func TestLoadOrCreate(t *testing.T) {
	store := teststore.Open(t)
	a := newTestIdentity(t, &IdentityOptions{Store: store})
	b := newTestIdentity(t, &IdentityOptions{Store: store})
	if a.CurrentKeyID() != b.CurrentKeyID() {
		t.Error("second NewIdentity made a new key instead of loading")
	}
	if err := store.PutSecret(context.Background(), identitySecret, []byte(`{"current":{"kty":"EC"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewIdentity(context.Background(), testClientID, &IdentityOptions{Store: store}); err == nil {
		t.Error("a corrupt stored key was accepted")
	}
}

func TestAssertions(t *testing.T) {
	clock := newClock()
	id := newTestIdentity(t, nil)
	id.now = clock.Now
	pub := id.current.PublicKey()
	const tokenEP = "https://auth.example.com/oauth/token"
	seen := map[string]bool{}
	for _, tc := range []struct {
		name    string
		sign    func() (Secret, error)
		typ     string
		sub     string
		aud     string
		session string
	}{
		{"client", func() (Secret, error) { return id.ClientAssertion(tokenEP) }, "JWT", testClientID, tokenEP, ""},
		{"session", func() (Secret, error) { return id.SessionAssertion("usr_Q7c1vK", tokenEP) }, "JWT", "usr_Q7c1vK", tokenEP, ""},
		{"browser", func() (Secret, error) {
			return id.BrowserAssertion("usr_Q7c1vK", "https://example.com/poppy/browser-session", "ses_2Lm0", "https://example.com/orders")
		}, "poppy-browser+jwt", "usr_Q7c1vK", "https://example.com/poppy/browser-session", "ses_2Lm0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // fresh jti every time
				as, err := tc.sign()
				if err != nil {
					t.Fatal(err)
				}
				hdr, c := verifyJWS(t, as.Reveal(), pub)
				if hdr.ExtraHeaders["typ"] != tc.typ || hdr.KeyID != id.CurrentKeyID() || hdr.Algorithm != "ES256" {
					t.Errorf("header = %+v", hdr)
				}
				if c["iss"] != testClientID || c["sub"] != tc.sub || c["aud"] != tc.aud {
					t.Errorf("claims = %v", c)
				}
				if c["iat"] != float64(1790900000) || c["exp"] != float64(1790900060) {
					t.Errorf("iat/exp = %v/%v", c["iat"], c["exp"])
				}
				jti, _ := c["jti"].(string)
				if raw, err := base64Raw(jti); err != nil || len(raw) != 16 || seen[jti] {
					t.Errorf("jti %q: not 16 fresh random bytes", jti)
				}
				seen[jti] = true
				if tc.session != "" && (c["session_id"] != tc.session || c["return_to"] != "https://example.com/orders") {
					t.Errorf("browser claims = %v", c)
				}
				if tc.session == "" && (c["session_id"] != nil || c["return_to"] != nil) {
					t.Errorf("unexpected claims = %v", c)
				}
			}
		})
	}
	if _, err := id.SessionAssertion("", tokenEP); err == nil {
		t.Error("an assertion without sub was signed")
	}
}

func TestIdentityMustExist(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	_, err := NewIdentity(ctx, "https://agent.example/agent.json", &IdentityOptions{Store: st, MustExist: true})
	if !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("empty store with MustExist: err = %v, want ErrNoIdentity", err)
	}
	if has, err := HasSigningKey(ctx, st); has || err != nil {
		t.Fatalf("HasSigningKey of an empty store = %v, %v", has, err)
	}
	made, err := NewIdentity(ctx, "https://agent.example/agent.json", &IdentityOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	// The key is found whatever client_id it was made for.
	if has, err := HasSigningKey(ctx, st); !has || err != nil {
		t.Fatalf("HasSigningKey after NewIdentity = %v, %v", has, err)
	}
	loaded, err := NewIdentity(ctx, "https://agent.example/agent.json", &IdentityOptions{Store: st, MustExist: true})
	if err != nil || loaded.CurrentKeyID() != made.CurrentKeyID() {
		t.Fatalf("MustExist did not load the stored key: %v", err)
	}
}
