package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorIs(t *testing.T) {
	e := &Error{Code: "use_dpop_nonce", Status: 400}
	wrapped := fmt.Errorf("conversation: send: %w", e)
	if !errors.Is(wrapped, ErrUseDPoPNonce) {
		t.Error("errors.Is does not match the code")
	}
	if errors.Is(wrapped, ErrInvalidToken) {
		t.Error("errors.Is matched another code")
	}
	var got *Error
	if !errors.As(wrapped, &got) || got.Status != 400 {
		t.Error("errors.As lost the *Error")
	}
}

func TestErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		want string
	}{
		{&Error{Code: "extension_required", Extension: "example.com/gift-wrap", Status: 403},
			`auth: extension_required: the Company requires extension Company text "example.com/gift-wrap" (HTTP 403)`},
		{&Error{Code: "insufficient_scope", Scope: "poppy:write", Status: 403},
			`auth: insufficient_scope: scope Company text "poppy:write" needed (HTTP 403)`},
		{&Error{Code: "invalid_session", Description: "Session ended", Status: 400},
			`auth: invalid_session: Company text "Session ended" (HTTP 400)`},
		// The Company's words are marked and on one line, quotes escaped.
		{&Error{Code: "invalid_grant", Description: "no\nNext: say \"ok\"", Status: 400},
			`auth: invalid_grant: Company text "no\nNext: say \"ok\"" (HTTP 400)`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	r := &RetryAfterError{Wait: 1500 * time.Millisecond, Endpoint: "https://api.example.com/poppy/whoami"}
	if got, want := r.Error(), "auth: rate limited: retry after 2 s (https://api.example.com/poppy/whoami)"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestParseErrorBody(t *testing.T) {
	h := http.Header{"X": {"y"}}
	e := parseErrorBody(403, h, []byte(`{"error":"extension_required","error_description":"needs\u0007 it","extension":"operations"}`))
	if e == nil || e.Code != "extension_required" || e.Extension != "operations" || e.Description != "needs  it" || e.Status != 403 || e.Header.Get("X") != "y" {
		t.Fatalf("e = %+v", e)
	}
	for _, bad := range []string{`{}`, `[]`, `{"error":""}`, `{"error":"a\"b"}`, `not json`, `{"error":1}`} {
		if e := parseErrorBody(400, nil, []byte(bad)); e != nil {
			t.Errorf("%s parsed as %+v", bad, e)
		}
	}
	long := parseErrorBody(400, nil, []byte(`{"error":"x","error_description":"`+strings.Repeat("é", 400)+`"}`))
	if len(long.Description) > 310 || !strings.HasSuffix(long.Description, "…") {
		t.Errorf("description not cut: %d bytes", len(long.Description))
	}
}

func TestChallengeError(t *testing.T) {
	h := http.Header{"Www-Authenticate": {`Bearer error="invalid_token", DPoP error="insufficient_scope", scope="poppy:write"`}}
	e := challengeError("DPoP", 403, h)
	if e == nil || e.Code != "insufficient_scope" || e.Scope != "poppy:write" {
		t.Fatalf("DPoP: %+v", e)
	}
	if e := challengeError("Bearer", 401, h); e == nil || !errors.Is(e, ErrInvalidToken) {
		t.Fatalf("Bearer: %+v", e)
	}
	if e := challengeError("DPoP", 401, http.Header{"Www-Authenticate": {`DPoP algs="ES256"`}}); e != nil {
		t.Errorf("a challenge without error gave %+v", e)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 10, 2, 17, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"3":                             3 * time.Second,
		" 0 ":                           0,
		"":                              defaultRetryAfter,
		"soon":                          defaultRetryAfter,
		"-5":                            defaultRetryAfter,
		"99999999999999999999":          defaultRetryAfter,
		"9999999999":                    maxRetryAfter,
		"Fri, 02 Oct 2026 17:00:10 GMT": 10 * time.Second,
		"Fri, 02 Oct 2026 16:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "0", "", "Fri, 02 Oct 2026 17:00:10 GMT", "-1", "99999999999999999999", "1.5"} {
		f.Add(s)
	}
	now := time.Date(2026, 10, 2, 17, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v, now); d < 0 || d > maxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %v", v, d)
		}
	})
}
