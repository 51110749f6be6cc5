package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// handleEcho serves POST /echo on the api host: it authenticates the
// request with poppytest and echoes the body.
func handleEcho(co *company) string {
	d := co.srv.Domain()
	co.srv.HandleFunc("api."+d, "POST /echo", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := co.srv.Authenticate(w, r, ""); !ok {
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Write(b)
	})
	return co.srv.URL("api."+d, "/echo")
}

// onlyReader hides everything but Read, so http.NewRequest sets no GetBody.
type onlyReader struct{ io.Reader }

func TestBodyReplayedOnRetry(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s := co.start(t)
	echo := handleEcho(co)
	for _, tc := range []struct {
		name string
		body io.Reader
	}{
		{"GetBody", strings.NewReader("hello with GetBody")},
		{"buffered", onlyReader{strings.NewReader("hello buffered")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co.srv.RotateNonce() // the first attempt gets use_dpop_nonce
			before := co.srv.Served("use_dpop_nonce")
			req, _ := http.NewRequest(http.MethodPost, echo, tc.body)
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.HasPrefix(string(got), "hello") {
				t.Errorf("HTTP %d %q", resp.StatusCode, got)
			}
			if n := co.srv.Served("use_dpop_nonce") - before; n != 1 {
				t.Errorf("use_dpop_nonce served %d times, want 1 (the retry)", n)
			}
		})
	}
	co.agent.maxBody = 8
	req, _ := http.NewRequest(http.MethodPost, echo, onlyReader{strings.NewReader("longer than eight bytes")})
	if _, err := s.Client().Do(req); err == nil {
		t.Error("a body past the replay limit without GetBody was sent")
	}
}

func TestResourceErrors(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s := co.start(t)
	d := co.srv.Domain()
	co.srv.HandleFunc("api."+d, "GET /orders", func(w http.ResponseWriter, r *http.Request) {
		if c, ok := co.srv.Authenticate(w, r, ""); ok {
			co.srv.RequireScopes(w, c, "poppy:read")
		}
	})
	co.srv.HandleFunc("api."+d, "GET /gift-wrap", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := co.srv.Authenticate(w, r, ""); !ok {
			return
		}
		// Poppy 0.1 §3.3: extension_required (HTTP 403) with the extension's name.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":"extension_required","error_description":"gift wrap needs it","extension":"example.com/gift-wrap"}`))
	})
	co.srv.HandleFunc("api."+d, "GET /forbidden", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := co.srv.Authenticate(w, r, ""); !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":"not_yours"}`))
	})

	big := `{"error":"x","pad":"` + strings.Repeat("a", 100<<10) + `"}`
	co.srv.HandleFunc("api."+d, "GET /big", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := co.srv.Authenticate(w, r, ""); !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(big))
	})

	_, err := s.Client().Get(co.srv.URL("api."+d, "/orders"))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrSignInRequired) && !errors.Is(err, ErrInsufficientScope) {
		t.Errorf("signed-out account call: err = %v", err)
	}
	_, err = s.Client().Get(co.srv.URL("api."+d, "/gift-wrap"))
	if !errors.As(err, &e) || !errors.Is(err, ErrExtensionRequired) || e.Extension != "example.com/gift-wrap" || e.Status != 403 {
		t.Errorf("extension_required: err = %v", err)
	}
	if !strings.Contains(err.Error(), `"example.com/gift-wrap"`) {
		t.Errorf("message does not name the extension: %v", err)
	}
	// Any other 403 reaches the caller with its body intact.
	resp, err := s.Client().Get(co.srv.URL("api."+d, "/forbidden"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || string(b) != `{"error":"not_yours"}` {
		t.Errorf("HTTP %d %q", resp.StatusCode, b)
	}
	resp, err = s.Client().Get(co.srv.URL("api."+d, "/big"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != big {
		t.Errorf("a large 403 body came back with %d bytes, want %d", len(b), len(big))
	}
}

// handleMCP serves POST /mcp on the mcp host, protected by poppytest for
// the MCP server's url, and answers with the caller.
func handleMCP(co *company) string {
	mcp := co.c.MCPServers[0]
	co.srv.HandleFunc("mcp."+co.srv.Domain(), "POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		if c, ok := co.srv.Authenticate(w, r, mcp); ok {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(c)
		}
	})
	return mcp
}

func TestBearerForMCP(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s := co.start(t)
	mcp := handleMCP(co)
	hc, err := s.BearerClient(mcp)
	if err != nil {
		t.Fatal(err)
	}
	post := func() caller {
		t.Helper()
		resp, err := hc.Post(mcp, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c caller
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&c) != nil {
			t.Fatalf("HTTP %d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		return c
	}
	c := post()
	if c.TokenType != "Bearer" || c.Resource != mcp || c.SessionID != s.Info().ID {
		t.Errorf("caller = %+v", c)
	}
	post() // cached: no new token request
	if n := countBearerRequests(t, co, mcp); n != 1 {
		t.Errorf("Bearer token requests = %d, want 1", n)
	}
	// The token renews on invalid_token.
	co.srv.ExpireTokens()
	before := co.srv.Served("invalid_token")
	post()
	if n := co.srv.Served("invalid_token") - before; n != 1 {
		t.Errorf("invalid_token served %d times, want 1", n)
	}
	if n := countBearerRequests(t, co, mcp); n != 2 {
		t.Errorf("Bearer token requests = %d, want 2", n)
	}
	// Never sent elsewhere.
	for _, u := range []string{co.whoamiURL(), co.srv.URL("mcp."+co.srv.Domain(), "/mcpx"), co.srv.URL("mcp."+co.srv.Domain(), "/")} {
		if _, err := hc.Get(u); err == nil {
			t.Errorf("the Bearer client sent a request to %s", u)
		}
	}
	if _, err := s.BearerClient(co.whoamiURL()); err == nil {
		t.Error("a Bearer client for a URL that is not an MCP server")
	}
}

// countBearerRequests counts token requests for resource, checking each
// went without a DPoP proof (Poppy 0.1 §4.3).
func countBearerRequests(t *testing.T, co *company, resource string) int {
	t.Helper()
	n := 0
	for _, r := range co.srv.Requests() {
		if r.Path != "/oauth/token" {
			continue
		}
		form, _ := url.ParseQuery(string(r.Body))
		if form.Get("resource") != resource {
			continue
		}
		n++
		if r.Header.Get("DPoP") != "" {
			t.Error("a Bearer token request carried a DPoP proof")
		}
		if form.Get("session_id") == "" {
			t.Error("a Bearer token request without session_id")
		}
	}
	return n
}

func TestTokenRequestRetryHasFreshAssertions(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	co.start(t)
	var forms []url.Values
	for _, r := range co.srv.Requests() {
		if r.Path == "/oauth/token" {
			f, _ := url.ParseQuery(string(r.Body))
			forms = append(forms, f)
		}
	}
	if len(forms) != 2 {
		t.Fatalf("token requests = %d, want 2 (use_dpop_nonce and retry)", len(forms))
	}
	for _, k := range []string{"client_assertion", "assertion"} {
		if forms[0].Get(k) == "" || forms[0].Get(k) == forms[1].Get(k) {
			t.Errorf("%s was not renewed for the retry", k)
		}
	}
}

// expectViolations is a poppytest.T that keeps the violations a test
// provokes on purpose instead of failing.
type expectViolations struct {
	*testing.T
	mu   sync.Mutex
	msgs []string
}

func (e *expectViolations) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.msgs = append(e.msgs, fmt.Sprintf(format, args...))
}

func TestTokenEndpointErrors(t *testing.T) {
	rec := &expectViolations{T: t}
	srv := poppytest.NewServer(rec, nil)
	// An agent whose documents are not published fails client authentication.
	id, err := NewIdentity(context.Background(), "https://"+srv.AgentHost()+"/agent.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := New(id, &Options{HTTPClient: srv.Client()})
	c := Company{Issuer: srv.Issuer(), TokenEndpoint: srv.URL("auth."+srv.Domain(), "/oauth/token")}
	_, err = a.StartSession(context.Background(), c, testUser)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidClient) || e.Status != 401 || !strings.HasPrefix(err.Error(), "auth: invalid_client") {
		t.Errorf("err = %v, want invalid_client", err)
	}
	for _, v := range srv.IssuedSecrets() {
		if strings.Contains(err.Error(), v) {
			t.Error("the error shows a secret")
		}
	}
	if len(rec.msgs) == 0 {
		t.Error("poppytest saw nothing wrong with an unpublished agent")
	}
}
