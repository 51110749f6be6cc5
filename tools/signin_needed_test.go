package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestSignInNeeded: sign-in errors from any Company request name the scopes
// and the sign-in type the Company offers with them.
func TestSignInNeeded(t *testing.T) {
	t.Parallel()
	company := poppytest.NewServer(t, nil)
	s := New(discovery.New(company.Client(), nil), nil)
	if _, err := s.companies.get(context.Background(), "example.com", false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err    error
		tool   string
		scopes string
	}{
		{&auth.Error{Code: "sign_in_required", Status: 401}, "sign_in_device", `["poppy:read"]`},
		{fmt.Errorf("call_api: %w", &auth.Error{Code: "insufficient_scope", Scope: "poppy:write"}), "sign_in_device", `["poppy:write"]`},
		// Only Direct Sign-In grants it, and this Server has no callback.
		{&auth.Error{Code: "insufficient_scope", Scope: "addresses"}, "", `["addresses"]`},
		{&auth.Error{Code: "insufficient_scope", Scope: "unknown"}, "", `["unknown"]`},
	} {
		r, ok := s.signIn.needed(context.Background(), "example.com", tc.err)
		if !ok || !r.IsError {
			t.Fatalf("%v: not a sign-in result", tc.err)
		}
		var got signInNeededResult
		raw, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(raw, &got)
		scopes, _ := json.Marshal(got.Scopes)
		if got.Tool != tc.tool || string(scopes) != tc.scopes || got.Next == "" {
			t.Errorf("%v: %+v", tc.err, got)
		}
	}
	for _, err := range []error{errors.New("x"), &auth.Error{Code: "invalid_token"}, nil} {
		if _, ok := s.signIn.needed(context.Background(), "example.com", err); ok {
			t.Errorf("%v taken for a sign-in error", err)
		}
	}
	if r, _ := s.signIn.needed(context.Background(), "unknown.example", auth.ErrSignInRequired); r == nil {
		t.Error("an undiscovered Company gave no advice")
	}
}

// TestSignInNeededDirect: sign_in_direct is advised only where poppy-mcp
// can take its callback: served under --public-url with the callback in
// agent.json's redirect_uris. The old code advised it everywhere, so the
// model was sent to a tool that could only fail.
func TestSignInNeededDirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	company := poppytest.NewServer(t, nil)
	advice := func(publicURL string, redirects ...string) signInNeededResult {
		t.Helper()
		id, err := auth.NewIdentity(ctx, "https://agent.example/agent.json", &auth.IdentityOptions{RedirectURIs: redirects})
		if err != nil {
			t.Fatal(err)
		}
		s := New(discovery.New(company.Client(), nil), &Options{Agent: auth.New(id, nil), PublicURL: publicURL})
		if _, err := s.companies.get(ctx, "example.com", false); err != nil {
			t.Fatal(err)
		}
		r, _ := s.signIn.needed(context.Background(), "example.com", &auth.Error{Code: "insufficient_scope", Scope: "addresses"})
		var got signInNeededResult
		raw, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(raw, &got)
		return got
	}
	if got := advice("https://agent.example", "https://agent.example/oauth/callback"); got.Tool != "sign_in_direct" {
		t.Errorf("with the callback: %+v", got)
	}
	for name, got := range map[string]signInNeededResult{
		"no public URL":              advice("", "https://agent.example/oauth/callback"),
		"callback not in agent.json": advice("https://agent.example"),
	} {
		if got.Tool != "" || !strings.Contains(got.Next, "--public-url") {
			t.Errorf("%s: %+v", name, got)
		}
	}
}
