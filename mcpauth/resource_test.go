package mcpauth_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// initialize is an MCP initialize request at the 2025-11-25 revision.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// postMCP posts body to /mcp with the client c and extra headers.
func postMCP(t *testing.T, c *http.Client, path, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "https://agent.test"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// challenge parses a response's Bearer challenge.
func challenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v %+v", resp.Header.Values("WWW-Authenticate"), err, cs)
	}
	return cs[0].Params
}

// TestMetadata: the protected resource metadata is served at the RFC 9728
// well-known URL of /mcp and at the root, as application/json; the go-sdk
// client's own fetcher accepts it (it checks that resource is the
// resource), and it names the issuer, the scopes and the header method; a
// 401's challenge points at it.
func TestMetadata(t *testing.T) {
	d := newDeployment(t, &mcpauth.Options{Scopes: []string{"mcp:tools"}})
	c := d.client("")
	for _, u := range []string{"https://agent.test/.well-known/oauth-protected-resource/mcp", "https://agent.test/.well-known/oauth-protected-resource"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d %v", u, resp.StatusCode, resp.Header)
		}
		m, err := oauthex.GetProtectedResourceMetadata(context.Background(), u, resourceURL, c)
		if err != nil {
			t.Fatalf("the go-sdk client refuses the metadata at %s: %v", u, err)
		}
		if len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != d.idp.Issuer() ||
			strings.Join(m.ScopesSupported, " ") != "mcp:tools" || strings.Join(m.BearerMethodsSupported, " ") != "header" {
			t.Errorf("metadata = %+v", m)
		}
	}
	p := challenge(t, postMCP(t, c, "/mcp", initialize, nil))
	if p["resource_metadata"] != "https://agent.test/.well-known/oauth-protected-resource/mcp" || p["scope"] != "mcp:tools" {
		t.Errorf("the 401 challenge = %v", p)
	}
	if _, ok := p["error"]; ok {
		t.Error("a request without a token got an error code (RFC 6750 §3.1: it SHOULD NOT)")
	}
}

// TestRefusals: every token that is not an access token of this issuer for
// this resource, within its lifetime, with the scope required, is refused
// with the status and Bearer challenge RFC 6750 and the MCP authorization
// specification ask for, pointing at the metadata; none reaches the MCP
// server; and no token appears in the log.
func TestRefusals(t *testing.T) {
	d := newDeployment(t, &mcpauth.Options{Scopes: []string{"mcp:tools"}})
	good := d.idp.AccessToken(t, mcpClient, "alice", "mcp:tools")
	cases := []struct {
		name, token string
		headers     map[string]string
		path        string
		skew        time.Duration
		status      int
		code        string
	}{
		{name: "no token", status: 401},
		{name: "another scheme", headers: map[string]string{"Authorization": "Basic YWxpY2U6c2VjcmV0"}, status: 401},
		{name: "not a JWT", token: "an-opaque-token", status: 401, code: "invalid_token"},
		{name: "expired", token: good, skew: 10 * time.Minute, status: 401, code: "invalid_token"},
		{name: "not yet valid", token: good, skew: -10 * time.Minute, status: 401, code: "invalid_token"},
		{name: "wrong issuer", token: d.other.AccessToken(t, mcpClient, "alice", "mcp:tools"), status: 401, code: "invalid_token"},
		{name: "wrong audience", token: d.idp.AccessToken(t, plainClient, "alice", "mcp:tools"), status: 401, code: "invalid_token"},
		{name: "another resource", token: d.idp.AccessToken(t, elsewhere, "alice", "mcp:tools"), status: 401, code: "invalid_token"},
		{name: "HS256 with the public key", token: hmacWithPublicKey(t, d, good), status: 401, code: "invalid_token"},
		{name: "alg none", token: unsigned(good), status: 401, code: "invalid_token"},
		{name: "payload changed", token: withSubject(good, "bob"), status: 401, code: "invalid_token"},
		{name: "missing scope", token: d.idp.AccessToken(t, mcpClient, "alice"), status: 403, code: "insufficient_scope"},
		{name: "token in the URL", path: "/mcp?access_token=" + good, status: 400, code: "invalid_request"},
	}
	if resp := postMCP(t, d.client(good), "/mcp", initialize, nil); resp.StatusCode != 200 {
		t.Fatalf("the good token: %d", resp.StatusCode)
	}
	keysFetched := d.idp.Served("/keys")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d.skew.Store(int64(tc.skew))
			defer d.skew.Store(0)
			headers := tc.headers
			if tc.token != "" {
				headers = map[string]string{"Authorization": "Bearer " + tc.token}
			}
			path := tc.path
			if path == "" {
				path = "/mcp"
			}
			resp := postMCP(t, d.client(""), path, initialize, headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			p := challenge(t, resp)
			if p["error"] != tc.code || p["resource_metadata"] != d.res.MetadataURL() {
				t.Errorf("challenge %v, want error=%q and resource_metadata", p, tc.code)
			}
			if tc.status == 403 && p["scope"] != "mcp:tools" {
				t.Errorf("insufficient_scope without the scope needed: %v", p)
			}
		})
	}
	if n := d.idp.Served("/keys") - keysFetched; n != 0 {
		t.Errorf("the refusals made the Resource fetch the issuer's keys %d more times", n)
	}
	if d.other.Served("/keys") != 0 || d.other.Served("/.well-known/openid-configuration") != 0 {
		t.Error("a token of another issuer made the Resource ask that issuer")
	}
	for _, tc := range cases {
		if sig := tc.token[strings.LastIndex(tc.token, ".")+1:]; sig != "" && strings.Contains(d.logs.String(), sig) {
			t.Errorf("%s: the token is in the log", tc.name)
		}
	}
	if strings.Contains(d.logs.String(), "alice") {
		t.Error("the log has the subject")
	}
}

// unsigned is tok with alg "none" and no signature.
func unsigned(tok string) string {
	parts := strings.Split(tok, ".")
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
}

// withSubject is tok with its sub replaced, and its signature kept.
func withSubject(tok, sub string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	json.Unmarshal(payload, &claims)
	claims["sub"] = sub
	payload, _ = json.Marshal(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
}

// hmacWithPublicKey re-signs tok's claims with HS256, keyed with the
// issuer's public key (PEM), the key-confusion attack on verifiers that
// take the algorithm from the token.
func hmacWithPublicKey(t *testing.T, d *deployment, tok string) string {
	t.Helper()
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: d.idp.Transport()}).Get(d.idp.Issuer() + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	json.NewDecoder(resp.Body).Decode(&set)
	resp.Body.Close()
	kid := parsed.Headers[0].KeyID
	der, err := x509.MarshalPKIXPublicKey(set.Key(kid)[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	parsed.UnsafeClaimsWithoutVerification(&claims)
	forged, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return forged
}

// TestTwoPeopleAtBothRevisions: the go-sdk client with each person's access
// token reaches the MCP server at both MCP revisions, and the tool sees
// each person as a local user of their own: the key of (issuer, sub).
func TestTwoPeopleAtBothRevisions(t *testing.T) {
	d := newDeployment(t, nil)
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		for _, person := range []string{"alice", "bob"} {
			tok := d.idp.AccessToken(t, mcpClient, person)
			got := whoami(t, d, tok, rev)
			if want := (mcpauth.User{Issuer: d.idp.Issuer(), Subject: person}).Key(); got != want {
				t.Errorf("%s as %s: the tool saw %q, want %q", rev, person, got, want)
			}
		}
	}
	if a, b := (mcpauth.User{Issuer: d.idp.Issuer(), Subject: "alice"}).Key(), (mcpauth.User{Issuer: d.idp.Issuer(), Subject: "bob"}).Key(); a == b || a == "" {
		t.Errorf("alice and bob share the key %q", a)
	}
}

// whoami calls the whoami tool at revision rev with token.
func whoami(t *testing.T, d *deployment, token, rev string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: resourceURL, HTTPClient: d.client(token), MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("%s: connect: %v", rev, err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("negotiated %s, want %s", got, rev)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s: whoami: %v %+v", rev, err, res)
	}
	return res.Content[0].(*sdk.TextContent).Text
}
