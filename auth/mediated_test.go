package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func creds(email, password string) map[string]Secret {
	return map[string]Secret{"email": NewSecret(email), "password": NewSecret(password)}
}

func TestMediatedComplete(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "correct-horse-battery"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != MediatedComplete || st.SignIn.Account == nil || !s.Info().SignedIn {
		t.Fatalf("step = %+v", st)
	}
	if code, err := co.account(t, s); code != 200 {
		t.Errorf("account endpoint: %d %v", code, err)
	}
	for _, r := range co.srv.Requests() {
		if strings.Contains(string(r.Body), "correct-horse-battery") && r.Path != "/poppy/sign-in" {
			t.Errorf("the password went to %s%s", r.Host, r.Path)
		}
	}
	co.scanSecrets(t, fmt.Sprintf("%v %+v %#v", st, st, st.SignIn))
}

func TestMediatedWrongCredentials(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	var e *Error
	if st.Status != MediatedFailed || !errors.As(st.Err, &e) || e.Code != "invalid_credentials" || s.Info().SignedIn {
		t.Fatalf("step = %+v", st)
	}
}

// TestMediatedRateLimited: past the attempt limit the Company answers 429,
// and the agent does not send the credentials again on its own.
func TestMediatedRateLimited(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{MediatedAttempts: 2})
	s := co.start(t)
	for range 2 {
		if _, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "wrong")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "correct-horse-battery"))
	var wait *RetryAfterError
	if !errors.As(err, &wait) {
		t.Fatalf("third attempt: %v, want *RetryAfterError", err)
	}
	if n := co.srv.Count("auth.example.com", "/poppy/sign-in"); n != 3 {
		t.Errorf("credential posts = %d, want 3", n)
	}
}

// TestMediatedCode: a wrong code asks again; the right one signs in; only
// the code goes to {endpoint}/{sign_in_id}.
func TestMediatedCode(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("sam@example.com", "sam-secret-42"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != MediatedCodeRequired || st.SentTo != "Text to the phone number ending in 71" || st.ExpiresAt.IsZero() {
		t.Fatalf("step = %+v", st)
	}
	again, err := s.SubmitCode(context.Background(), st, NewSecret("nope"))
	if err != nil || again.Status != MediatedCodeRequired {
		t.Fatalf("wrong code: %+v %v", again, err)
	}
	done, err := s.SubmitCode(context.Background(), again, NewSecret(co.srv.LastCode(st.signInID)))
	if err != nil || done.Status != MediatedComplete || !s.Info().SignedIn {
		t.Fatalf("right code: %+v %v", done, err)
	}
	for _, r := range co.srv.Requests() {
		if strings.HasPrefix(r.Path, "/poppy/sign-in/") && strings.Contains(string(r.Body), "sam-secret-42") {
			t.Error("the code step carried the credentials")
		}
	}
}

func TestMediatedCodeAttemptLimit(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{MediatedAttempts: 2})
	s := co.start(t)
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("sam@example.com", "sam-secret-42"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err = s.SubmitCode(context.Background(), st, NewSecret("nope")); err != nil || st.Status != MediatedCodeRequired {
		t.Fatalf("first wrong code: %+v %v", st, err)
	}
	if st, err = s.SubmitCode(context.Background(), st, NewSecret("nope")); err != nil || st.Status != MediatedFailed {
		t.Fatalf("second wrong code: %+v %v", st, err)
	}
	if _, err := s.SubmitCode(context.Background(), st, NewSecret("nope")); err == nil {
		t.Error("a failed sign-in took another code")
	}
}

func TestReadMediatedAnswers(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	for _, bad := range []string{
		`{"status":"code_required","sign_in_id":"../x"}`,
		`{"status":"code_required","sign_in_id":""}`,
		`{"status":"code_required","sign_in_id":"a/b"}`,
		`{"status":"complete"}`,
		`{"status":"weird"}`,
		`not json`,
	} {
		if st, err := s.readMediated(http.StatusOK, http.Header{}, []byte(bad), []string{"poppy:read"}); err == nil {
			t.Errorf("%s accepted: %+v", bad, st)
		}
	}
	st, err := s.readMediated(http.StatusBadRequest, http.Header{}, []byte(`{"status":"failed","error":"invalid_credentials"}`), nil)
	if err != nil || st.Status != MediatedFailed || !errors.Is(st.Err, &Error{Code: "invalid_credentials"}) {
		t.Errorf("failed answer: %+v %v", st, err)
	}
}

func FuzzParseCodeRequired(f *testing.F) {
	f.Add(`{"status":"code_required","sign_in_id":"sgn_3Hq8","code":{"sent_to":"Text to 71"},"expires_at":"2026-10-02T17:15:00-07:00"}`)
	f.Add(`{"status":"code_required","sign_in_id":"%2e%2e","code":{"sent_to":"\u001b[31m"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		s := &Session{a: &Agent{now: timeNow}}
		st, err := s.readMediated(http.StatusOK, http.Header{}, []byte(body), []string{"poppy:read"})
		if err != nil || st.Status != MediatedCodeRequired {
			return
		}
		if strings.ContainsAny(st.signInID, "/?#%") || !printable(st.signInID) || st.SentTo != untrusted.Text(st.SentTo, 300) {
			t.Errorf("accepted %+v", st)
		}
	})
}

// TestMediatedAccountMismatch: a Session once signed in to another account
// is replaced, and the credentials go once more, to the new Session's
// sign-in, within the same call.
func TestMediatedAccountMismatch(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	before := co.signInDevice(t, s, "acct_sam", []string{"poppy:read"})
	if err := s.SignOut(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "correct-horse-battery"))
	if err != nil || st.Status != MediatedComplete || st.SignIn.SessionID == before.SessionID {
		t.Fatalf("step = %+v, %v (Session was %s)", st, err, before.SessionID)
	}
	if n := co.srv.Count("auth.example.com", "/poppy/sign-in"); n != 2 {
		t.Errorf("credential posts = %d, want 2 (mismatch, then the new Session)", n)
	}
}

// TestMediatedReadsTheBody: the answers are read by their body's status,
// whatever the 2xx or 4xx status line (Poppy 0.1 §4.7 defines them by
// status): a 401 for wrong credentials, a 202 code_required and a 201
// complete, and a 200 that says failed. On main, reading the status line,
// the 202 and the 201 were errors and the 200 failed one too.
func TestMediatedReadsTheBody(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, &poppytest.Options{MediatedHTTPStatus: map[string]int{
		"invalid_credentials": 401, "code_required": 202, "complete": 201, "invalid_code": 200}})
	s := co.start(t)
	st, err := s.SignInMediated(ctx, []string{"poppy:read"}, creds("dana@example.com", "wrong"))
	if err != nil || st.Status != MediatedFailed || !errors.Is(st.Err, &Error{Code: "invalid_credentials"}) {
		t.Fatalf("wrong credentials under 401: %+v %v", st, err)
	}
	st, err = s.SignInMediated(ctx, []string{"poppy:read"}, creds("sam@example.com", "sam-secret-42"))
	if err != nil || st.Status != MediatedCodeRequired {
		t.Fatalf("code_required under 202: %+v %v", st, err)
	}
	done, err := s.SubmitCode(ctx, st, NewSecret(co.srv.LastCode(st.signInID)))
	if err != nil || done.Status != MediatedComplete || !s.Info().SignedIn {
		t.Fatalf("complete under 201: %+v %v", done, err)
	}

	co = newSignInCo(t, &poppytest.Options{MediatedAttempts: 1, MediatedHTTPStatus: map[string]int{"invalid_code": 200}})
	s = co.start(t)
	st, err = s.SignInMediated(ctx, []string{"poppy:read"}, creds("sam@example.com", "sam-secret-42"))
	if err != nil {
		t.Fatal(err)
	}
	wrong := "000000"
	if co.srv.LastCode(st.signInID) == wrong {
		wrong = "111111"
	}
	if st, err = s.SubmitCode(ctx, st, NewSecret(wrong)); err != nil || st.Status != MediatedFailed || !errors.Is(st.Err, &Error{Code: "invalid_code"}) {
		t.Fatalf("failed under 200: %+v %v", st, err)
	}
}

// TestMediatedServerErrorIsNotComplete: a 5xx is never a sign-in, even with
// a complete body: the Session is not taken for signed in.
func TestMediatedServerErrorIsNotComplete(t *testing.T) {
	co := newSignInCo(t, &poppytest.Options{MediatedHTTPStatus: map[string]int{"complete": 503}})
	s := co.start(t)
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "correct-horse-battery"))
	if err == nil || s.Info().SignedIn {
		t.Fatalf("complete under 503: %+v %v, signed in %v", st, err, s.Info().SignedIn)
	}
}

// TestMediatedRedirectNotFollowed: Poppy 0.1 §4.7, "Personal Agents MUST
// NOT send credentials to any endpoint other than the Company's
// auth.mediated.endpoint". The endpoint answers 307 or 308, which keep the
// method and body, to another path of its origin (which would take the
// credentials and sign the Session in): the agent posts them once, to the
// endpoint, not again there, and the sign-in fails saying so.
func TestMediatedRedirectNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		co := newSignInCo(t, &poppytest.Options{MediatedRedirect: status})
		s := co.start(t)
		st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "correct-horse-battery"))
		if err == nil || !strings.Contains(err.Error(), "redirected") || st != nil || s.Info().SignedIn {
			t.Fatalf("%d: step %+v, error %v, signed in %v", status, st, err, s.Info().SignedIn)
		}
		posts := map[string]int{}
		for _, r := range co.srv.Requests() {
			if strings.Contains(string(r.Body), "correct-horse-battery") {
				posts[r.Path]++
			}
		}
		if posts["/poppy/sign-in"] != 1 || posts[poppytest.MediatedMovedPath] != 0 || len(posts) != 1 {
			t.Errorf("%d: the credentials were posted to %v, want once to /poppy/sign-in", status, posts)
		}
		co.scanSecrets(t, err.Error())
	}
}

// TestReadMediatedStatusLines: every status line, every body status.
func TestReadMediatedStatusLines(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	code := `{"status":"code_required","sign_in_id":"sgn_1"}`
	failed := `{"status":"failed","error":"invalid_credentials"}`
	bare := `{"error":"invalid_request"}`
	for _, tc := range []struct {
		status int
		body   string
		want   string // "" for an error
	}{
		{200, code, MediatedCodeRequired}, {202, code, MediatedCodeRequired}, {400, code, MediatedCodeRequired},
		{200, failed, MediatedFailed}, {400, failed, MediatedFailed}, {401, failed, MediatedFailed}, {403, failed, MediatedFailed},
		{400, bare, MediatedFailed}, {200, bare, MediatedFailed},
		{500, failed, ""}, {502, code, ""}, {302, code, ""}, {100, code, ""},
		{200, `{"status":"complete","error":"invalid_request"}`, ""},
		{200, `{}`, ""},
	} {
		st, err := s.readMediated(tc.status, http.Header{}, []byte(tc.body), []string{"poppy:read"})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("HTTP %d %s: accepted %+v", tc.status, tc.body, st)
		case tc.want != "" && (err != nil || st.Status != tc.want):
			t.Errorf("HTTP %d %s: %+v %v, want %s", tc.status, tc.body, st, err, tc.want)
		}
	}
}

// FuzzReadMediated: whatever the status line and body, a mediated answer is
// complete only when the status line is 2xx or 4xx and the body carries a
// usable token, and never signs in otherwise.
func FuzzReadMediated(f *testing.F) {
	f.Add(200, `{"status":"complete","access_token":"a","token_type":"DPoP","expires_in":60,"session_id":"s","signed_in":true}`)
	f.Add(500, `{"status":"complete","access_token":"a","token_type":"DPoP","expires_in":60,"session_id":"s","signed_in":true}`)
	f.Add(401, `{"status":"failed","error":"invalid_credentials"}`)
	f.Add(202, `{"status":"code_required","sign_in_id":"sgn_1"}`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		s := &Session{a: &Agent{now: timeNow}, bearer: map[string]*tokenCell{}}
		s.cell.set(&Token{SessionID: "s"}) // signed out
		st, err := s.readMediated(status, http.Header{}, []byte(body), []string{"poppy:read"})
		if err != nil {
			if s.Info().SignedIn {
				t.Errorf("HTTP %d: an error, yet signed in", status)
			}
			return
		}
		if status/100 != 2 && status/100 != 4 {
			t.Errorf("HTTP %d read as %s", status, st.Status)
		}
		if (st.Status == MediatedComplete) != s.Info().SignedIn {
			t.Errorf("HTTP %d: %s, signed in %v", status, st.Status, s.Info().SignedIn)
		}
	})
}

// TestMediatedRenewsOnInvalidToken: a 401 with a DPoP invalid_token
// challenge is the Session Token's, not the credentials': the Session is
// renewed and the credentials sent once more, to the same endpoint.
func TestMediatedRenewsOnInvalidToken(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	co.srv.ExpireTokens()
	st, err := s.SignInMediated(context.Background(), []string{"poppy:read"}, creds("dana@example.com", "correct-horse-battery"))
	if err != nil || st.Status != MediatedComplete || !s.Info().SignedIn {
		t.Fatalf("after invalid_token: %+v %v", st, err)
	}
	if n := co.srv.Served("invalid_token"); n != 1 {
		t.Errorf("invalid_token served %d times, want 1", n)
	}
}
