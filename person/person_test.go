package person

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// TestParseUser: the colon that ends the issuer is the first after its
// path, if any, else the last; what is no https issuer and subject is refused.
func TestParseUser(t *testing.T) {
	for in, want := range map[string]mcpauth.User{
		"https://login.example.org/realms/people:248289761001": {Issuer: "https://login.example.org/realms/people", Subject: "248289761001"},
		"https://login.example.org:8443/r:urn:x:1":             {Issuer: "https://login.example.org:8443/r", Subject: "urn:x:1"},
		"https://accounts.example.com:auth0|abc":               {Issuer: "https://accounts.example.com", Subject: "auth0|abc"},
		"https://login.example.org:8443:sub":                   {Issuer: "https://login.example.org:8443", Subject: "sub"},
	} {
		if got, err := ParseUser(in); err != nil || got != want {
			t.Errorf("ParseUser(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "sub", "http://login.example.org:sub", "https://login.example.org/realms/people", "https://x/:"} {
		if u, err := ParseUser(bad); err == nil {
			t.Errorf("ParseUser(%q) = %+v", bad, u)
		}
	}
}
