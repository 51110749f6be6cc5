package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

func TestParseToken(t *testing.T) {
	now := time.Unix(1790900000, 0)
	// Poppy 0.1 §4.4 example response.
	tok, err := parseToken([]byte(`{
	  "access_token": "eyJhbGciOi…Qp4w", "token_type": "dpop", "expires_in": 3600,
	  "refresh_token": "pat_8Hk2…Wq1", "refresh_token_expires_in": 2592000,
	  "scope": "poppy:read  poppy:write", "session_id": "ses_2Lm0", "signed_in": true}`), "DPoP", now)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken.Reveal() != "eyJhbGciOi…Qp4w" || tok.Type != "DPoP" || tok.RefreshToken.Reveal() != "pat_8Hk2…Wq1" ||
		!tok.ExpiresAt.Equal(now.Add(time.Hour)) || !tok.RefreshExpiresAt.Equal(now.Add(30*24*time.Hour)) ||
		strings.Join(tok.Scopes, ",") != "poppy:read,poppy:write" || tok.SessionID != "ses_2Lm0" || !tok.SignedIn {
		t.Errorf("tok = %+v", tok)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"access_token":"a","token_type":"DPoP","expires_in":0,"session_id":"s"}`, "expires_in"},
		{`{"access_token":"a","token_type":"DPoP","expires_in":-1}`, "expires_in"},
		{`{"access_token":"a","token_type":"DPoP"}`, "expires_in"},
		{`{"access_token":"a","token_type":"DPoP","expires_in":"3600"}`, "token response"},
		{`{"access_token":"a","token_type":"Bearer","expires_in":60}`, "token_type"},
		{`{"token_type":"DPoP","expires_in":60}`, "access_token"},
		{`{"access_token":"a","token_type":"DPoP","expires_in":60,"session_id":"a b"}`, "session_id"},
		{`[`, "token response"},
	} {
		_, err := parseToken([]byte(tc.body), "DPoP", now)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "auth: ") {
			t.Errorf("%s: err = %v, want one about %s", tc.body, err, tc.want)
		}
	}
	big, err := parseToken([]byte(`{"access_token":"a","token_type":"Bearer","expires_in":9223372036854775807}`), "Bearer", now)
	if err != nil || big.Lifetime != maxLifetime {
		t.Errorf("huge expires_in: %v, %v", big, err)
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		`{"access_token":"eyJ","token_type":"DPoP","expires_in":3600,"scope":"","session_id":"ses_2Lm0","signed_in":false}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":1,"refresh_token":"r","refresh_token_expires_in":9999999999999}`,
		`{"access_token":"a","token_type":"DPoP","expires_in":1e3}`,
		`{"error":"use_dpop_nonce"}`, `null`, `{"expires_in":-9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Unix(1790900000, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		tok, err := parseToken(body, "DPoP", now)
		if err != nil {
			if tok != nil {
				t.Fatal("token with an error")
			}
			return
		}
		if tok.AccessToken.IsZero() || tok.Lifetime <= 0 || tok.Lifetime > maxLifetime || !tok.ExpiresAt.After(now) {
			t.Fatalf("accepted a bad token: %+v", tok)
		}
	})
}

func FuzzParseErrorBody(f *testing.F) {
	for _, s := range []string{
		`{"error":"extension_required","error_description":"x","extension":"operations"}`,
		`{"error":"invalid_session"}`, `{"error":"\u0000"}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := parseErrorBody(400, nil, body)
		if e == nil {
			return
		}
		if !untrusted.Code(e.Code) || len(e.Description) > 304 || strings.ContainsAny(e.Error(), "\n\r\x00") {
			t.Fatalf("bad error %q", e.Error())
		}
	})
}
