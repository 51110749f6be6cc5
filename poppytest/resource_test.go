package poppytest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func TestResourceRejections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		send      func(a *rawAgent, tok string) response
		challenge string // in WWW-Authenticate
		violation string // "" for none
	}{
		{"ath mismatch", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", tok, a.proof("GET", testWhoamiURL, "other-token", "", nil))
		}, `DPoP error="invalid_dpop_proof"`, "ath"},
		{"no ath", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", tok, a.proof("GET", testWhoamiURL, "", "", nil))
		}, `DPoP error="invalid_dpop_proof"`, "ath"},
		{"wrong key binding", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", tok, a.proofWith(newKey(a.t), "GET", testWhoamiURL, tok, "", nil))
		}, `DPoP error="invalid_dpop_proof"`, "bound to"},
		{"wrong htu", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", tok, a.proof("GET", "https://api.example.com/other", tok, "", nil))
		}, `DPoP error="invalid_dpop_proof"`, "does not match"},
		{"htu normalised", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", tok, a.proof("GET", "HTTPS://API.example.com:443/poppy/whoami", tok, "", nil))
		}, "", ""},
		{"no proof", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", tok, "")
		}, `DPoP error="invalid_dpop_proof"`, "DPoP headers"},
		{"no token", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "", "", "")
		}, `DPoP algs="ES256"`, "without a Session Token"},
		{"DPoP token as Bearer", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "Bearer", tok, "")
		}, `DPoP error="invalid_token"`, "takes only DPoP"},
		{"unknown token", func(a *rawAgent, tok string) response {
			return a.call("GET", testWhoamiURL, "DPoP", "nope", a.proof("GET", testWhoamiURL, "nope", "", nil))
		}, `DPoP error="invalid_token"`, ""},
		{"ExpireTokens", func(a *rawAgent, tok string) response {
			a.s.ExpireTokens()
			return a.whoami(tok, "")
		}, `DPoP error="invalid_token"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newTestCompany(t, nil)
			tok := a.startSession().str("access_token")
			r := tc.send(a, tok)
			got := r.header.Get("WWW-Authenticate")
			if tc.challenge == "" && r.status != 200 {
				t.Errorf("answer %d %q, want 200", r.status, got)
			}
			if tc.challenge != "" && (r.status != 401 || !strings.HasPrefix(got, tc.challenge)) {
				t.Errorf("answer %d %q, want 401 %s", r.status, got, tc.challenge)
			}
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§4.3", tc.violation)
			}
		})
	}
}

func TestTokenLifetimeAndRenewal(t *testing.T) {
	s, rt, a, c := newTestCompany(t, &poppytest.Options{TokenLifetime: 10 * time.Minute})
	r := a.startSession()
	if r.body["expires_in"] != 600.0 {
		t.Errorf("expires_in %v, want 600", r.body["expires_in"])
	}
	c.Advance(10 * time.Minute)
	if w := a.whoami(r.str("access_token"), ""); w.status != 401 {
		t.Errorf("expired token: %d", w.status)
	}
	renew := a.postToken(a.grantForm(url.Values{"session_id": {r.str("session_id")}}), a.proof("POST", testTokenURL, "", "", nil))
	if w := a.whoami(renew.str("access_token"), ""); w.status != 200 {
		t.Errorf("renewed token: %d %v", w.status, w.body)
	}
	wantNoViolation(t, s, rt)
	if n := s.Served("invalid_token"); n != 1 {
		t.Errorf("Served(invalid_token) = %d, want 1", n)
	}
}

// TestSupersededTokenRefused: a Session Token whose replacement has been
// used is refused at once, per use: the Session's DPoP token and the Bearer
// token of its MCP server live side by side, and each is superseded only by
// a newer one of its own kind. An agent that keeps sending the old token
// gets invalid_token, with no grace.
func TestSupersededTokenRefused(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	s.Handle("mcp.example.com", "POST /mcp", mcpHandler(s))
	old := a.startSession()
	sid, t1 := old.str("session_id"), old.str("access_token")
	t2 := a.postToken(a.grantForm(url.Values{"session_id": {sid}}), a.proof("POST", testTokenURL, "", "", nil)).str("access_token")
	if w := a.whoami(t1, ""); w.status != 200 {
		t.Fatalf("old token before its replacement was used: %d (a request in flight during renewal is fine)", w.status)
	}
	if w := a.whoami(t2, ""); w.status != 200 {
		t.Fatalf("new token: %d", w.status)
	}
	w := a.whoami(t1, "")
	if w.status != 401 || !strings.Contains(w.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("old token after the new one was used: %d %q, want 401 invalid_token", w.status, w.header.Get("WWW-Authenticate"))
	}

	bearer := func() string {
		return a.postToken(a.grantForm(url.Values{"session_id": {sid}, "resource": {testMCPURL}}), "").str("access_token")
	}
	b1 := bearer()
	if m := a.call("POST", testMCPURL, "Bearer", b1, ""); m.status != 200 {
		t.Fatalf("Bearer token: %d", m.status)
	}
	if w := a.whoami(t2, ""); w.status != 200 {
		t.Fatalf("the DPoP token after a Bearer token was used: %d, want 200 (another kind)", w.status)
	}
	b2 := bearer()
	a.call("POST", testMCPURL, "Bearer", b2, "")
	if m := a.call("POST", testMCPURL, "Bearer", b1, ""); m.status != 401 || !strings.Contains(m.header.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("old Bearer token after the new one was used: %d %q", m.status, m.header.Get("WWW-Authenticate"))
	}
	if w := a.whoami(t2, ""); w.status != 200 {
		t.Errorf("the DPoP token after a new Bearer token: %d", w.status)
	}
	wantNoViolation(t, s, rt)
	if n := s.Served("invalid_token"); n != 2 {
		t.Errorf("Served(invalid_token) = %d, want 2", n)
	}
}

// mcpHandler is a protected MCP endpoint that echoes its Caller.
func mcpHandler(s *poppytest.Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c, ok := s.Authenticate(w, r, testMCPURL); ok {
			_ = json.NewEncoder(w).Encode(c)
		}
	}
}

func TestBearerTokensForMCP(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	s.Handle("mcp.example.com", "POST /mcp", mcpHandler(s))
	sid := a.startSession().str("session_id")

	// Poppy 0.1 §4.3: the renewal request without DPoP, with resource = the MCP url.
	r := a.postToken(a.grantForm(url.Values{"session_id": {sid}, "resource": {testMCPURL}}), "")
	if r.status != 200 || r.str("token_type") != "Bearer" || r.str("session_id") != sid {
		t.Fatalf("Bearer token: %d %v", r.status, r.body)
	}
	bearer := r.str("access_token")
	if m := a.call("POST", testMCPURL, "Bearer", bearer, ""); m.status != 200 || m.str("token_type") != "Bearer" || m.str("resource") != testMCPURL {
		t.Errorf("MCP with Bearer: %d %v", m.status, m.body)
	}
	m := a.call("POST", testMCPURL, "", "", "")
	if wa := m.header.Get("WWW-Authenticate"); m.status != 401 || !strings.HasPrefix(wa, "Bearer ") ||
		!strings.Contains(wa, `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("MCP without a token: %d %q", m.status, wa)
	}
	wantNoViolation(t, s, rt)

	if w := a.call("GET", testWhoamiURL, "Bearer", bearer, ""); w.status != 401 {
		t.Errorf("Bearer token at a DPoP API: %d", w.status)
	}
	wantViolation(t, s, rt, "§4.3", "takes only DPoP")
}

func TestDPoPTokenAtMCPIsRefused(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	s.Handle("mcp.example.com", "POST /mcp", mcpHandler(s))
	tok := a.startSession().str("access_token")
	m := a.call("POST", testMCPURL, "DPoP", tok, a.proof("POST", testMCPURL, tok, "", nil))
	if m.status != 401 || !strings.HasPrefix(m.header.Get("WWW-Authenticate"), `Bearer error="invalid_token"`) {
		t.Errorf("general DPoP token at MCP: %d %q", m.status, m.header.Get("WWW-Authenticate"))
	}
	wantViolation(t, s, rt, "§4.3", "issued for resource")
}

func TestTokenOfAnotherCompany(t *testing.T) {
	_, _, a, _ := newTestCompany(t, nil)
	tok := a.startSession().str("access_token")
	other, rt := newRecorded(t, &poppytest.Options{Domain: "shop.test"})
	b := newAgent(t, other, time.Now)
	u := "https://api.shop.test/poppy/whoami"
	r := b.call("GET", u, "DPoP", tok, a.proof("GET", u, tok, "", nil))
	if r.status != 401 {
		t.Errorf("another Company's token: %d", r.status)
	}
	wantViolation(t, other, rt, "issued by https://auth.example.com")
}

func TestRequireScopes(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	s.HandleFunc("api.example.com", "GET /orders", func(w http.ResponseWriter, r *http.Request) {
		if c, ok := s.Authenticate(w, r, ""); ok && s.RequireScopes(w, c, "poppy:read") {
			w.WriteHeader(200)
		}
	})
	tok := a.startSession().str("access_token")
	u := "https://api.example.com/orders"
	r := a.call("GET", u, "DPoP", tok, a.proof("GET", u, tok, "", nil))
	if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `DPoP error="sign_in_required"`) {
		t.Errorf("signed-out caller: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	c := &poppytest.Caller{SignedIn: true, Scopes: []string{"poppy:read"}, TokenType: "DPoP"}
	rec := httptest.NewRecorder()
	if s.RequireScopes(rec, c, "poppy:read", "poppy:write") || rec.Code != 403 ||
		rec.Header().Get("WWW-Authenticate") != `DPoP error="insufficient_scope", error_description="the token lacks a scope", scope="poppy:read poppy:write", algs="ES256"` {
		t.Errorf("insufficient scope: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	if !s.RequireScopes(httptest.NewRecorder(), c, "poppy:read") {
		t.Errorf("RequireScopes refused a granted scope")
	}
	wantNoViolation(t, s, rt)
}
