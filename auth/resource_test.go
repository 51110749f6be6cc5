package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// storeResource is the resource the test Company gives its OpenAPI entry.
const storeResource = "https://api.example.com/store"

// newResourceCompany serves a Company whose OpenAPI entry has a resource,
// and a handler at api.<domain>/store/whoami that takes only tokens issued
// for it (Poppy 0.1 §4.3 "Narrower tokens").
func newResourceCompany(t *testing.T) (*company, string) {
	t.Helper()
	co := newCompany(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		for _, api := range doc["apis"].([]any) {
			if e := api.(map[string]any); e["type"] == "openapi" {
				e["resource"] = storeResource
			}
		}
	}}, nil, nil)
	u := co.srv.URL("api."+co.srv.Domain(), "/store/whoami")
	co.srv.HandleFunc("api."+co.srv.Domain(), "GET /store/whoami", func(w http.ResponseWriter, r *http.Request) {
		if c, ok := co.srv.Authenticate(w, r, storeResource); ok {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(c)
		}
	})
	return co, u
}

func TestResourceClient(t *testing.T) {
	co, u := newResourceCompany(t)
	s := co.start(t)
	hc, err := s.ResourceClient(storeResource)
	if err != nil {
		t.Fatal(err)
	}
	get := func() caller {
		t.Helper()
		resp, err := hc.Get(u)
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
	c := get()
	if c.TokenType != "DPoP" || c.Resource != storeResource || c.SessionID != s.Info().ID {
		t.Errorf("caller = %+v", c)
	}
	get() // cached: no new token request
	if n := countResourceRequests(t, co, storeResource); n != 1 {
		t.Errorf("token requests for the resource = %d, want 1", n)
	}
	co.srv.ExpireTokens()
	get() // renews on invalid_token
	if n := countResourceRequests(t, co, storeResource); n != 2 {
		t.Errorf("token requests for the resource = %d, want 2", n)
	}
	// The Session's own token still works at the general APIs, and the
	// resource's token is not sent there.
	if c := mustWhoami(t, co, s); c.Resource != "" {
		t.Errorf("the Session's general token has resource %q", c.Resource)
	}
	if len(co.srv.Violations()) != 0 {
		t.Errorf("violations: %q", co.srv.Violations())
	}
}

func TestResourceClientRefusesBadResource(t *testing.T) {
	co, _ := newResourceCompany(t)
	s := co.start(t)
	for _, r := range []string{"", "store", "https://api.example.com/store#x", "::"} {
		if _, err := s.ResourceClient(r); err == nil {
			t.Errorf("ResourceClient(%q) accepted", r)
		}
	}
}

// countResourceRequests counts token requests for resource, checking each
// carried a DPoP proof and the Session's ID.
func countResourceRequests(t *testing.T, co *company, resource string) int {
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
		if r.Header.Get("DPoP") == "" || form.Get("session_id") == "" {
			t.Error("a token request for a resource without a DPoP proof or session_id")
		}
	}
	return n
}

// TestResourceClientSignedIn: the resource's token follows the Session's
// state: signed out, the store API asks for sign-in; after sign-in, a new
// token comes from the refresh_token grant with resource and a proof.
func TestResourceClientSignedIn(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{OpenAPIResource: storeResource})
	s := co.start(t)
	hc, err := s.ResourceClient(storeResource)
	if err != nil {
		t.Fatal(err)
	}
	orders := co.srv.URL("api."+co.srv.Domain(), "/store/orders")
	if _, err := hc.Get(orders); !errors.Is(err, ErrSignInRequired) {
		t.Fatalf("signed out: %v, want sign_in_required", err)
	}
	co.signInDevice(t, s, "acct_dana", []string{"poppy:read"})
	resp, err := hc.Get(orders)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("signed in: HTTP %d", resp.StatusCode)
	}
	f := co.tokenForms()[len(co.tokenForms())-1]
	if f.Get("grant_type") != "refresh_token" || f.Get("resource") != storeResource || f.Get("session_id") != s.Info().ID {
		t.Errorf("token request grant %q resource %q", f.Get("grant_type"), f.Get("resource"))
	}
}
