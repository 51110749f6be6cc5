package poppytest_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// creds is a §4.7 request body for scope with email and password.
func creds(scope, email, password string) map[string]any {
	return map[string]any{"scope": scope, "credentials": map[string]string{"email": email, "password": password}}
}

// submitCode posts a one-time code for a sign-in with the Session Token.
func (a *rawAgent) submitCode(token, signInID, code string) response {
	a.t.Helper()
	return a.postJSON(testMediatedURL+"/"+signInID, token, "application/json", map[string]string{"code": code})
}

func TestMediatedSignIn(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	start := a.startSession()
	tok := start.str("access_token")
	r := a.mediated(tok, creds("poppy:read", "dana@example.com", "correct-horse-battery"))
	if r.status != 200 || r.str("status") != "complete" || r.str("scope") != "poppy:read" || r.body["signed_in"] != true ||
		r.str("session_id") != start.str("session_id") || !strings.HasPrefix(r.str("refresh_token"), "pat_") ||
		r.str("token_type") != "DPoP" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("mediated sign-in: %d %v", r.status, r.body)
	}
	// The new Session Token is bound to the same DPoP key as the one that asked.
	if acct := a.getWithToken(testAccountURL, r.str("access_token")); acct.str("account") != "acct_dana" {
		t.Errorf("account endpoint: %d %v", acct.status, acct.body)
	}
	if !slices.Contains(s.IssuedSecrets(), "correct-horse-battery") || slices.Contains(s.IssuedSecrets(), "dana@example.com") {
		t.Errorf("IssuedSecrets should hold the secret field's value and not the email")
	}
	wantNoViolation(t, s, rt)
}

var expiresAtRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$`)

func TestMediatedOneTimeCode(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	tok := a.startSession().str("access_token")
	r := a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42"))
	id := r.str("sign_in_id")
	sent, _ := r.body["code"].(map[string]any)
	if r.status != 200 || r.str("status") != "code_required" || !strings.HasPrefix(id, "sgn_") ||
		sent["sent_to"] != "Text to the phone number ending in 71" || !expiresAtRE.MatchString(r.str("expires_at")) {
		t.Fatalf("code_required: %d %v", r.status, r.body)
	}
	code := s.LastCode(id)
	if len(code) != 6 || strings.Trim(code, "0123456789") != "" || s.LastCode("sgn_nope") != "" {
		t.Fatalf("LastCode = %q", code)
	}
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if again := a.submitCode(tok, id, wrong); again.status != 200 || again.str("status") != "code_required" || again.str("sign_in_id") != id {
		t.Errorf("wrong code: %d %v", again.status, again.body)
	}
	done := a.submitCode(tok, id, code)
	if done.status != 200 || done.str("status") != "complete" || done.body["signed_in"] != true {
		t.Fatalf("right code: %d %v", done.status, done.body)
	}
	if who := a.whoami(done.str("access_token"), ""); who.str("account") != "acct_sam" {
		t.Errorf("whoami %v", who.body)
	}
	if !slices.Contains(s.IssuedSecrets(), code) || !slices.Contains(s.IssuedSecrets(), wrong) {
		t.Errorf("IssuedSecrets lacks the codes")
	}
	wantNoViolation(t, s, rt)

	if r := a.submitCode(done.str("access_token"), id, code); r.status != 400 || r.str("status") != "failed" {
		t.Errorf("code for a finished sign-in: %d %v", r.status, r.body)
	}
	wantViolation(t, s, rt, "§4.7", "already finished")
}

func TestMediatedCodeAttemptsAndSessions(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, &poppytest.Options{MediatedAttempts: 2})
	tok := a.startSession().str("access_token")
	id := a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42")).str("sign_in_id")
	code := s.LastCode(id)

	// Poppy 0.1 §4.7: "Only the Session that started a sign-in can finish it."
	other := a.startSession().str("access_token")
	wantError(t, "another Session", a.submitCode(other, id, code), 400, "invalid_session")
	wantViolation(t, s, rt, "§4.7", "another Session")

	if r := a.submitCode(tok, id, "x"); r.str("status") != "code_required" {
		t.Errorf("first wrong code: %v", r.body)
	}
	r := a.submitCode(tok, id, "y")
	if r.status != 400 || r.str("status") != "failed" || r.str("error") != "invalid_code" {
		t.Errorf("last wrong code: %d %v", r.status, r.body)
	}
	if len(s.SignedInSessions()) != 0 {
		t.Errorf("a failed sign-in signed in: %+v", s.SignedInSessions())
	}
	if len(s.Violations()) != 1 {
		t.Errorf("violations %q, want only the first", s.Violations())
	}
	if r := a.submitCode(tok, "sgn_unknown", "1"); r.status != 404 || r.str("status") != "failed" {
		t.Errorf("unknown sign-in: %d %v", r.status, r.body)
	}
	if v := s.Violations(); len(v) != 2 || !strings.Contains(v[1], "no such sign-in") {
		t.Errorf("violations %q, want the unknown sign-in reported", v)
	}
}

func TestMediatedCodeExpires(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	tok := a.startSession().str("access_token")
	id := a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42")).str("sign_in_id")
	c.Advance(10 * time.Minute)
	r := a.submitCode(tok, id, s.LastCode(id))
	if r.status != 400 || r.str("status") != "failed" || r.str("error") != "expired_token" {
		t.Errorf("code after expires_at: %d %v", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
}

func TestMediatedRateLimit(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	tok := a.startSession().str("access_token")
	for i := range 3 {
		r := a.mediated(tok, creds("poppy:read", "dana@example.com", "guess"))
		if r.status != 400 || r.str("status") != "failed" || r.str("error") != "invalid_credentials" {
			t.Fatalf("wrong credentials %d: %d %v", i, r.status, r.body)
		}
		if strings.Contains(mustMarshal(t, r.body), "guess") || strings.Contains(mustMarshal(t, r.body), "dana@") {
			t.Errorf("an answer echoes the credentials: %v", r.body)
		}
	}
	// Poppy 0.1 §4.7: "A Company that offers Mediated Sign-In MUST rate-limit attempts"
	r := a.mediated(tok, creds("poppy:read", "dana@example.com", "correct-horse-battery"))
	if r.status != 429 || r.header.Get("Retry-After") != "60" {
		t.Fatalf("after 3 wrong: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	wantNoViolation(t, s, rt)
	c.Advance(30 * time.Second)
	if r := a.mediated(tok, creds("poppy:read", "dana@example.com", "correct-horse-battery")); r.status != 429 {
		t.Errorf("too early: %d", r.status)
	}
	wantViolation(t, s, rt, "§4.3", "before Retry-After")
	c.Advance(30 * time.Second)
	tok = a.startSession().str("access_token") // another Session of the same client and User
	if r := a.mediated(tok, creds("poppy:read", "dana@example.com", "correct-horse-battery")); r.str("status") != "complete" {
		t.Errorf("after Retry-After: %d %v", r.status, r.body)
	}
	if s.Served("invalid_credentials") != 3 || s.Served("rate_limited") != 2 {
		t.Errorf("Served: invalid_credentials %d, rate_limited %d", s.Served("invalid_credentials"), s.Served("rate_limited"))
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMediatedRejections(t *testing.T) {
	dana := map[string]string{"email": "dana@example.com", "password": "correct-horse-battery"}
	for _, tc := range []struct {
		name        string
		contentType string
		body        any
		status      int
		code        string
		violation   string
	}{
		{"no scope", "application/json", map[string]any{"credentials": dana}, 400, "invalid_scope", "without scope"},
		{"scope not offered", "application/json", map[string]any{"scope": "poppy:write", "credentials": dana}, 400, "invalid_scope", ""},
		{"not JSON of §4.7", "application/json", []string{"dana@example.com"}, 400, "invalid_request", "body is not"},
		{"lacks password", "application/json", map[string]any{"scope": "poppy:read", "credentials": map[string]string{"email": "dana@example.com"}}, 400, "invalid_request", `lack the field "password"`},
		{"extra field", "application/json", map[string]any{"scope": "poppy:read", "credentials": map[string]string{"email": "dana@example.com", "password": "x", "pin": "1234"}}, 400, "invalid_request", `"pin"`},
		{"form body", "application/x-www-form-urlencoded", creds("poppy:read", "dana@example.com", "x"), 400, "invalid_request", "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newSignInCompany(t, nil)
			tok := a.startSession().str("access_token")
			r := a.postJSON(testMediatedURL, tok, tc.contentType, tc.body)
			if r.status != tc.status || r.str("error") != tc.code || r.str("status") != "failed" {
				t.Errorf("answer %d %v, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§4.7", tc.violation)
			}
		})
	}
}

func TestMediatedCodeStepWithCredentials(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	tok := a.startSession().str("access_token")
	id := a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42")).str("sign_in_id")
	body := map[string]any{"code": s.LastCode(id), "credentials": map[string]string{"email": "sam@example.com", "password": "sam-secret-42"}}
	wantError(t, "credentials again", a.postJSON(testMediatedURL+"/"+id, tok, "application/json", body), 400, "invalid_request")
	wantViolation(t, s, rt, "§4.7", "carries credentials")
}

func TestMediatedNeedsASessionToken(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, nil)
	r := a.call("POST", testMediatedURL, "", "", "")
	if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "DPoP") {
		t.Errorf("without a token: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	wantViolation(t, s, rt, "without a Session Token")
}

// TestMediatedHTTPStatus: with Options.MediatedHTTPStatus the answers keep
// their bodies under other status lines (a 202 code_required, a 401 for
// wrong credentials, a 201 complete), so an agent that reads the status
// line instead of the body's status misreads every one of them.
func TestMediatedHTTPStatus(t *testing.T) {
	s, rt, a, _ := newSignInCompany(t, &poppytest.Options{MediatedHTTPStatus: map[string]int{
		"invalid_credentials": 401, "code_required": 202, "complete": 201}})
	tok := a.startSession().str("access_token")
	r := a.mediated(tok, creds("poppy:read", "dana@example.com", "wrong"))
	if r.status != 401 || r.str("status") != "failed" || r.str("error") != "invalid_credentials" ||
		r.header.Get("WWW-Authenticate") != `DPoP algs="ES256"` {
		t.Errorf("wrong credentials: %d %q %v", r.status, r.header.Get("WWW-Authenticate"), r.body)
	}
	r = a.mediated(tok, creds("poppy:read", "sam@example.com", "sam-secret-42"))
	if r.status != 202 || r.str("status") != "code_required" || r.str("sign_in_id") == "" {
		t.Fatalf("code_required: %d %v", r.status, r.body)
	}
	done := a.submitCode(tok, r.str("sign_in_id"), s.LastCode(r.str("sign_in_id")))
	if done.status != 201 || done.str("status") != "complete" || done.body["signed_in"] != true {
		t.Errorf("complete: %d %v", done.status, done.body)
	}
	wantNoViolation(t, s, rt)
}
