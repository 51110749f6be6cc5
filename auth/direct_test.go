package auth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// TestPKCEVector is RFC 7636 Appendix B.
func TestPKCEVector(t *testing.T) {
	if got := s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Errorf("S256 = %s", got)
	}
	v, c := newVerifier()
	if len(v.Reveal()) != 43 || s256(v.Reveal()) != c {
		t.Errorf("verifier of %d characters", len(v.Reveal()))
	}
}

func startDirect(t *testing.T, co *signInCo, s *Session, scopes ...string) *DirectSignIn {
	t.Helper()
	d, err := s.StartDirect(testRedirect, scopes)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(d.URL)
	q := u.Query()
	if q.Get("state") != d.State || q.Get("code_challenge_method") != "S256" || q.Get("redirect_uri") != testRedirect || strings.Contains(d.URL, d.verifier.Reveal()) {
		t.Fatalf("authorization URL %s", d.URL)
	}
	// The User's browser opens it: the Company shows its consent page.
	resp, err := co.srv.Client().Get(d.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("consent page: %v %v", resp, err)
	}
	resp.Body.Close()
	return d
}

func callback(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || !strings.HasPrefix(raw, testRedirect+"?") {
		t.Fatalf("redirect to %s", raw)
	}
	return u.Query()
}

func TestDirectApproved(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	d := startDirect(t, co, s, "poppy:read", "addresses")
	to, err := co.srv.ApproveAuthorization(d.State, "acct_dana", "poppy:read")
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.FinishDirect(context.Background(), d, callback(t, to))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Info().SignedIn || !slices.Equal(in.Missing, []string{"addresses"}) || in.Account == nil {
		t.Errorf("sign-in = %+v, Session %+v", in, s.Info())
	}
	f := co.tokenForms()[len(co.tokenForms())-1]
	if f.Get("grant_type") != "authorization_code" || f.Get("session_id") != s.Info().ID || f.Get("code_verifier") != d.verifier.Reveal() {
		t.Errorf("exchange form: grant %q session %q", f.Get("grant_type"), f.Get("session_id"))
	}
	co.scanSecrets(t, fmt.Sprintf("%v %+v %#v %v", d, d, *d, in))
}

func TestDirectDenied(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	started := len(co.tokenForms()) // the start, with its nonce retry
	d := startDirect(t, co, s, "poppy:read")
	to, err := co.srv.DenyAuthorization(d.State)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishDirect(context.Background(), d, callback(t, to)); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("FinishDirect = %v, want access_denied", err)
	}
	if s.Info().SignedIn || len(co.tokenForms()) != started {
		t.Error("a declined sign-in reached the token endpoint or signed in")
	}
}

// TestDirectChecksStateAndIss: a callback with another state or another
// issuer's iss (RFC 9207 mix-up) is refused before any exchange.
func TestDirectChecksStateAndIss(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	started := len(co.tokenForms()) // the start, with its nonce retry
	d := startDirect(t, co, s, "poppy:read")
	to, err := co.srv.ApproveAuthorization(d.State, "acct_dana")
	if err != nil {
		t.Fatal(err)
	}
	good := callback(t, to)
	for name, edit := range map[string]func(url.Values){
		"other state":  func(q url.Values) { q.Set("state", "x"+d.State) },
		"no state":     func(q url.Values) { q.Del("state") },
		"other iss":    func(q url.Values) { q.Set("iss", "https://auth.evil.example") },
		"iss with /":   func(q url.Values) { q.Set("iss", co.c.Issuer+"/") },
		"no iss":       func(q url.Values) { q.Del("iss") },
		"two iss":      func(q url.Values) { q.Add("iss", co.c.Issuer) },
		"no code":      func(q url.Values) { q.Del("code") },
		"error in iss": func(q url.Values) { q.Set("iss", "https://auth.evil.example"); q.Set("error", "access_denied") },
	} {
		q := url.Values{}
		for k, v := range good {
			q[k] = slices.Clone(v)
		}
		edit(q)
		if _, err := s.FinishDirect(context.Background(), d, q); err == nil || errors.Is(err, ErrAccessDenied) {
			t.Errorf("%s: FinishDirect = %v", name, err)
		}
	}
	if n := len(co.tokenForms()) - started; n != 0 {
		t.Errorf("token requests = %d: a bad callback was exchanged", n)
	}
	if _, err := s.FinishDirect(context.Background(), d, good); err != nil {
		t.Errorf("the good callback after the bad ones: %v", err)
	}
}

func TestDirectNeedsRegisteredRedirect(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	if _, err := s.StartDirect("https://agent.example/elsewhere", []string{"poppy:read"}); err == nil {
		t.Error("StartDirect accepted a redirect URI the agent does not publish")
	}
}

// FuzzCheckCallback: a callback is accepted only with the state sent, the
// Company's exact issuer, and no error.
func FuzzCheckCallback(f *testing.F) {
	f.Add("state=abc&iss=https%3A%2F%2Fauth.example.com&code=x")
	f.Add("state=abc&iss=https%3A%2F%2Fauth.example.com&error=access_denied")
	f.Add("state=abc&state=abc&iss=https%3A%2F%2Fauth.example.com%2F")
	f.Add("state=ABC&iss=https%3A%2F%2FAUTH.example.com&error=%00")
	s := &Session{company: Company{Issuer: "https://auth.example.com"}}
	d := &DirectSignIn{State: "abc"}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		err = s.checkCallback(d, q)
		ok := len(q["state"]) == 1 && q.Get("state") == "abc" && len(q["iss"]) == 1 && q.Get("iss") == "https://auth.example.com"
		if err == nil && (!ok || q.Get("error") != "") {
			t.Errorf("accepted %q", raw)
		}
		var e *Error
		if errors.As(err, &e) && !untrusted.Code(e.Code) {
			t.Errorf("error code %q", e.Code)
		}
	})
}
