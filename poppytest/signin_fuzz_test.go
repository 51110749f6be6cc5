package poppytest

// Fuzz tests of the sign-in parsers of agent input: the mediated sign-in
// bodies, the authorization request's parameters and user codes.

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func FuzzMediatedBody(f *testing.F) {
	for _, seed := range []string{
		`{"scope":"poppy:read","credentials":{"email":"dana@example.com","password":"correct-horse-battery"}}`,
		`{"code":"123456"}`, `{"credentials":{"email":1}}`, `{"credentials":null,"code":{}}`, `[]`, `{`, ``,
		`{"scope":"poppy:read","credentials":{"email":"a","password":"b","pin":"c"}}`,
	} {
		f.Add(seed)
	}
	s := NewUnstartedServer(quietT{}, nil)
	f.Fuzz(func(t *testing.T, body string) {
		r, _ := http.NewRequest(http.MethodPost, "https://auth.example.com/poppy/sign-in", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req struct {
			Scope       *string           `json:"scope"`
			Credentials map[string]string `json:"credentials"`
		}
		if e := s.readMediatedBody(r, &req); e != nil {
			if e.code != "invalid_request" {
				t.Fatalf("readMediatedBody(%q) = %s, want invalid_request", body, e.code)
			}
			return
		}
		e := s.checkCredentialFields(r, req.Credentials)
		_, hasEmail := req.Credentials["email"]
		_, hasPassword := req.Credentials["password"]
		if ok := hasEmail && hasPassword && len(req.Credentials) == 2; ok != (e == nil) {
			t.Fatalf("checkCredentialFields(%q) = %v", req.Credentials, e)
		}
	})
}

func FuzzAuthorizeParams(f *testing.F) {
	good := "response_type=code&state=Xq81vR&scope=poppy%3Aread&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
	for _, seed := range []string{good, good + "&state=again", "response_type=token", "", "scope=%zz", strings.Replace(good, "S256", "plain", 1)} {
		f.Add(seed)
	}
	s := NewUnstartedServer(quietT{}, nil)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		scopes, e := s.checkAuthorizeParams(nil, q)
		if (e == nil) == (len(scopes) == 0) {
			t.Fatalf("checkAuthorizeParams(%q) = %q, %v: want scopes or an error", raw, scopes, e)
		}
		if e == nil && (q.Get("code_challenge_method") != "S256" || q.Get("state") == "" || q.Get("response_type") != "code") {
			t.Fatalf("checkAuthorizeParams(%q) accepted a request that breaks §4.5", raw)
		}
	})
}

func FuzzUserCode(f *testing.F) {
	for _, seed := range []string{"WDJB-MJHT", "wdjbmjht", "WDJB MJHT", "", "ÄÖÜ-1234", "BBBBBBBBBBBB"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n := normalizeUserCode(raw)
		if again := normalizeUserCode(n); again != n {
			t.Fatalf("normalizeUserCode(%q) = %q, then %q", raw, n, again)
		}
		letters := strings.ReplaceAll(n, "-", "")
		want := letters
		if len(letters) == 8 {
			want = letters[:4] + "-" + letters[4:]
		}
		if n != want || strings.Trim(letters, userCodeAlphabet) != "" {
			t.Fatalf("normalizeUserCode(%q) = %q, want %q", raw, n, want)
		}
	})
}
