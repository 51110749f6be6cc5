package livecheck

import (
	"net/http"
	"strings"
	"testing"
)

func answer(status int, challenge, body string) *exchange {
	h := http.Header{"Content-Type": {"application/json"}}
	if challenge != "" {
		h.Set("WWW-Authenticate", challenge)
	}
	return &exchange{status: status, header: h, body: []byte(body)}
}

// TestJudgeRefusal: only accepting a request is a security bug; a
// refusal with the wrong code or without a challenge is a plain error.
func TestJudgeRefusal(t *testing.T) {
	ok := answer(200, "", `{}`)
	account := answer(401, `DPoP error="sign_in_required"`, `{}`)
	for _, tc := range []struct {
		name     string
		x        *exchange
		control  *exchange
		want     Status
		security bool
	}{
		{"accepted", answer(200, "", `{}`), ok, Failed, true},
		{"answered as the valid request", answer(401, `DPoP error="sign_in_required"`, `{}`), account, Failed, true},
		{"refused with the code", answer(401, `DPoP error="invalid_dpop_proof", algs="ES256"`, `{}`), ok, Passed, false},
		{"refused with another code", answer(401, `DPoP error="invalid_token"`, `{}`), ok, Failed, false},
		{"refused without a challenge", answer(401, "", `{"error":"invalid_dpop_proof"}`), ok, Failed, false},
		{"a server error", answer(500, "", ``), ok, Failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := judgeRefusal(tc.x, tc.control, "a probe", "invalid_dpop_proof")
			if o.status != tc.want || o.security != tc.security {
				t.Errorf("%s (security %v), want %s (security %v): %s", o.status, o.security, tc.want, tc.security, o.msg)
			}
		})
	}
}

// TestJudgeTokenRefusal: issuing a token is a security bug; refusing with
// another code than the section names is a plain error.
func TestJudgeTokenRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		x        *exchange
		want     Status
		security bool
	}{
		{"issued", answer(200, "", `{"access_token":"t","token_type":"DPoP","expires_in":60}`), Failed, true},
		{"200 without a token", answer(200, "", `{}`), Failed, false},
		{"refused with the code", answer(400, "", `{"error":"invalid_grant"}`), Passed, false},
		{"refused with another code", answer(400, "", `{"error":"invalid_request"}`), Failed, false},
		{"no OAuth error", answer(502, "", `<html>`), Failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := judgeTokenRefusal(tc.x, "invalid_grant", "a probe")
			if o.status != tc.want || o.security != tc.security {
				t.Errorf("%s (security %v), want %s (security %v): %s", o.status, o.security, tc.want, tc.security, o.msg)
			}
		})
	}
}

// TestStartProblems: each field §4.2 lists for a new signed-out Session
// is checked, and a token response that has them all has no problem.
func TestStartProblems(t *testing.T) {
	good := `{"access_token":"t","token_type":"dpop","expires_in":3600,"scope":"","session_id":"ses_1","signed_in":false}`
	for body, want := range map[string]string{
		good: "",
		`{"access_token":"t","token_type":"Bearer","expires_in":3600,"session_id":"ses_1","signed_in":false}`:                    `token_type is "Bearer"`,
		`{"access_token":"t","token_type":"DPoP","expires_in":0,"session_id":"ses_1","signed_in":false}`:                         "expires_in",
		`{"access_token":"t","token_type":"DPoP","expires_in":"3600","session_id":"ses_1","signed_in":false}`:                    "expires_in",
		`{"access_token":"t","token_type":"DPoP","expires_in":3600,"signed_in":false}`:                                           "session_id",
		`{"access_token":"t","token_type":"DPoP","expires_in":3600,"session_id":"ses_1"}`:                                        "signed_in",
		`{"access_token":"t","token_type":"DPoP","expires_in":3600,"session_id":"ses_1","signed_in":true}`:                       "signed_in",
		`{"access_token":"t","token_type":"DPoP","expires_in":3600,"session_id":"ses_1","signed_in":false,"scope":"poppy:read"}`: "scope",
	} {
		tr, err := parseTokenReply([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		got := strings.Join(startProblems(tr), "; ")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want one about %q", body, got, want)
		}
	}
}
