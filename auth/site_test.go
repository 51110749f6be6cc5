package auth

import (
	"context"
	"crypto/ecdsa"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// ukSite is the Company of co at its second domain example.co.uk, as that
// domain's poppy.json describes it (poppytest.Options.OtherDomains).
func ukSite(co *signInCo) Company {
	c := co.c
	c.Domain = "example.co.uk"
	c.MediatedEndpoint = "https://auth.example.co.uk/poppy/sign-in"
	c.BrowserSessionEndpoint = "https://example.co.uk/poppy/browser-session"
	c.MCPServers = []string{"https://mcp.example.co.uk/mcp"}
	return c
}

// TestSiteBrowserAssertion: the Session at the second domain signs for that
// domain's endpoint and pages; the Session's own domain still signs for
// its own. Another issuer is not the same Company.
func TestSiteBrowserAssertion(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{OtherDomains: []string{"example.co.uk"}})
	s := co.start(t)
	w, err := s.At(ukSite(co))
	if err != nil {
		t.Fatal(err)
	}
	as, err := w.BrowserAssertion("https://example.co.uk/orders")
	if err != nil {
		t.Fatal(err)
	}
	_, c := verifyJWS(t, as.Reveal(), co.agent.Identity().JWKS().Keys[0].Key.(*ecdsa.PublicKey))
	if c["aud"] != "https://example.co.uk/poppy/browser-session" || c["session_id"] != s.Info().ID {
		t.Errorf("claims %v", c)
	}
	if _, err := w.BrowserAssertion("https://example.com/orders"); err == nil {
		t.Error("the second domain's Site signed for a page of the first domain")
	}
	other := ukSite(co)
	other.Issuer = "https://auth.example.co.uk"
	if _, err := s.At(other); err == nil {
		t.Error("At accepted a Company of another issuer")
	}
}

// TestSiteMediatedCode: credentials and the one-time code both go to the
// second domain's auth.mediated.endpoint, and sign the one Session in.
func TestSiteMediatedCode(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{OtherDomains: []string{"example.co.uk"}})
	s := co.start(t)
	w, err := s.At(ukSite(co))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := w.SignInMediated(ctx, []string{"poppy:read"}, creds("sam@example.com", "sam-secret-42"))
	if err != nil || st.Status != MediatedCodeRequired {
		t.Fatalf("SignInMediated = %+v, %v", st, err)
	}
	st, err = s.SubmitCode(ctx, st, NewSecret(co.srv.LastCode(st.signInID)))
	if err != nil || st.Status != MediatedComplete || !s.Info().SignedIn {
		t.Fatalf("SubmitCode = %+v, %v", st, err)
	}
	for _, r := range co.srv.Requests() {
		if strings.HasPrefix(r.Path, "/poppy/sign-in") && r.Host != "auth.example.co.uk" {
			t.Errorf("a mediated request went to %s%s", r.Host, r.Path)
		}
	}
}

// TestSiteBearerClient: the second domain's MCP server gets a Bearer token
// of the one Session issued for its url; the first domain's Session alone
// does not reach it.
func TestSiteBearerClient(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{OtherDomains: []string{"example.co.uk"}})
	s := co.start(t)
	const ukMCP = "https://mcp.example.co.uk/mcp"
	if _, err := s.BearerClient(ukMCP); err == nil {
		t.Fatal("the first domain's Session gave a client for the second domain's MCP server")
	}
	w, _ := s.At(ukSite(co))
	hc, err := w.BearerClient(ukMCP)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, ukMCP, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "protocolVersion") {
		t.Errorf("initialize at %s: %d %s", ukMCP, resp.StatusCode, body)
	}
	if n := len(co.srv.Sessions()); n != 1 {
		t.Errorf("%d Sessions, want 1", n)
	}
}
