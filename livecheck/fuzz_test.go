package livecheck

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseTokenReply: any body a Company sends as a token response is
// read without panicking, and a reply is returned only with an access_token.
func FuzzParseTokenReply(f *testing.F) {
	for _, s := range []string{
		`{"access_token":"a","token_type":"DPoP","expires_in":3600,"scope":"","session_id":"ses_1","signed_in":false}`,
		`{"access_token":"a","expires_in":"3600","signed_in":"false","session_id":7}`,
		`{"access_token":""}`, `[]`, `null`, `{"access_token":1e400}`, `{"expires_in":-1,"access_token":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseTokenReply(body)
		if err == nil && r.accessToken == "" {
			t.Fatal("a reply without an access_token")
		}
	})
}

// FuzzParseRead: any read of events is read without panicking, and the
// fields it lacks are listed by name.
func FuzzParseRead(f *testing.F) {
	for _, s := range []string{
		`{"events":[{"type":"message","message":{"id":"m"}}],"cursor":"c","has_more":false,"status":"idle","responder":"agent"}`,
		`{"events":null,"cursor":1}`, `{"events":[1,{"message":"x"},{"type":"message","message":null}]}`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rd, err := parseRead(body)
		if err != nil {
			return
		}
		_ = rd.count("m")
		for _, m := range rd.missing() {
			if !strings.Contains("cursor has_more status responder events", m) {
				t.Fatalf("missing %q", m)
			}
		}
	})
}

// FuzzErrorCode: whatever a Company puts in WWW-Authenticate and the
// body, the code read is a plain code, "?" or "": Company text is never
// echoed into a report.
func FuzzErrorCode(f *testing.F) {
	f.Add(`DPoP error="use_dpop_nonce", error_description="x"`, `{"error":"invalid_grant"}`)
	f.Add(`Bearer error="invalid_token\u0007"`, `{"error":"<script>"}`)
	f.Add(`DPoP algs="ES256"`, `{"error":"unauthorized"}`)
	f.Add(`DPoP error=`, `not json`)
	f.Fuzz(func(t *testing.T, challengeValue, body string) {
		x := &exchange{header: http.Header{"Www-Authenticate": {challengeValue}}, body: []byte(body)}
		_, code := errorCode(x)
		_, c2 := challenge(x, "DPoP")
		for _, c := range []string{code, c2} {
			if c != "" && c != "?" && (!utf8.ValidString(c) || strings.ContainsAny(c, " \"<>\\\x00\n")) {
				t.Fatalf("code %q echoes Company text", c)
			}
		}
	})
}
