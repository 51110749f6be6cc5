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
