package poppytest

// Fuzz tests of the parsers of agent input. The Server is strict, so it must
// reject anything malformed without panicking.

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// quietT is a T that ignores violations: fuzz input violates on purpose.
type quietT struct{}

func (quietT) Helper()               {}
func (quietT) Errorf(string, ...any) {}
func (quietT) Cleanup(func())        {}

const seedProof = "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwiY3J2IjoiUC0yNTYiLCJ4IjoibDh0RnJoeC0zNHRWM2hSSUNSRFk5ekNrRGxwQmhGNDJVUVVmV1ZBV0JGcyIsInkiOiI5VkU0amZfT2tfbzY0emJUVGxjdU5KYWpIbXQ2djlURFZyVTBDZHZHUkRBIn19.eyJqdGkiOiJlMWozVl9iS2ljOC1MQUVCIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vYXV0aC5leGFtcGxlLmNvbS9vYXV0aC90b2tlbiIsImlhdCI6MTc5MDkwMDAwMH0.c2ln"

func FuzzProof(f *testing.F) {
	for _, seed := range []string{seedProof, "", "a.b.c", "eyJ9.e30.", "eyJqd2siOnsiZCI6IngifX0.e30.c2ln", strings.Repeat(".", 5)} {
		f.Add(seed, "")
	}
	f.Add(seedProof, "token")
	s := NewUnstartedServer(quietT{}, nil)
	f.Fuzz(func(t *testing.T, proof, token string) {
		r, _ := http.NewRequest(http.MethodPost, "https://auth.example.com/oauth/token", nil)
		r.Header.Set("DPoP", proof)
		jkt, e := s.checkProof(r, "auth.example.com", token)
		if (jkt == "") == (e == nil) {
			t.Fatalf("checkProof(%q) = %q, %v: want exactly one of a thumbprint and an error", proof, jkt, e)
		}
	})
}

func FuzzNormalizeHTU(f *testing.F) {
	for _, seed := range []string{"https://api.example.com/orders", "HTTPS://API.example.com:443", "https://a/b?c#d",
		"http://x:80/", "https://u@h/", "/relative", "https://[::1]:8443/p", "https://h/%41"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, ok := normalizeHTU(raw)
		if !ok {
			return
		}
		if again, ok := normalizeHTU(n); !ok || again != n {
			t.Fatalf("normalizeHTU(%q) = %q, which normalizes to %q, %v", raw, n, again, ok)
		}
	})
}

func FuzzAssertion(f *testing.F) {
	for _, seed := range []string{seedProof, "", "a.b.c", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"} {
		f.Add(seed, seed)
	}
	s := NewUnstartedServer(quietT{}, nil)
	c := &client{id: "https://agent.example/agent.json"}
	f.Fuzz(func(t *testing.T, assertion, clientAssertion string) {
		form := url.Values{"assertion": {assertion}}
		if claims, e := s.checkSessionAssertion(nil, form, c); claims != nil || e == nil {
			t.Fatalf("an agent with no keys had an assertion accepted: %v", claims)
		}
		form = url.Values{"client_assertion_type": {clientAssertionType}, "client_assertion": {clientAssertion},
			"client_id": {"https://not-covered.test/agent.json"}}
		if c, e := s.authenticateClient(httptest.NewRequestWithContext(t.Context(), http.MethodPost, "https://auth.example.com/oauth/token", nil), form, ""); c != nil || e == nil {
			t.Fatalf("a client assertion was accepted for an unreachable client")
		}
	})
}
