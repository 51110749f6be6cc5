package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

var readWrite = []string{"poppy:read", "poppy:write"}

// TestDeviceApprovedAfterPending: the agent waits the interval before each
// poll, sends session_id, a fresh assertion and proof each time, and once the
// User approves fewer scopes than asked the Session is signed in and the
// missing scope is reported.
func TestDeviceApprovedAfterPending(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	d, err := s.StartDevice(context.Background(), readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if d.UserCode == "" || d.VerificationURI == "" || d.VerificationURIComplete == "" || d.Interval != time.Second {
		t.Fatalf("device authorization = %+v", d)
	}
	co.setOnSleep(func(n int) {
		if n == 3 { // two polls found it pending
			if err := co.srv.ApproveDevice(d.UserCode, "acct_dana", "poppy:read"); err != nil {
				t.Error(err)
			}
		}
	})
	in, err := s.PollDevice(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Scopes, []string{"poppy:read"}) || !slices.Equal(in.Missing, []string{"poppy:write"}) || in.Account == nil {
		t.Errorf("sign-in = %+v", in)
	}
	if info := s.Info(); !info.SignedIn || info.ID != in.SessionID {
		t.Errorf("Session after sign-in = %+v", info)
	}
	if got := co.slept(); !slices.Equal(got, []time.Duration{time.Second, time.Second, time.Second}) {
		t.Errorf("waits before polls = %v, want the interval before each of 3 polls", got)
	}
	polls := 0
	for _, f := range co.tokenForms() {
		if f.Get("grant_type") == GrantDeviceCode {
			polls++
			if f.Get("session_id") != in.SessionID {
				t.Errorf("poll with session_id %q", f.Get("session_id"))
			}
		}
	}
	if polls != 3 {
		t.Errorf("polls = %d, want 3", polls)
	}
	if code, err := co.account(t, s); err != nil || code != 200 {
		t.Errorf("account endpoint after sign-in: %d %v", code, err)
	}
	co.scanSecrets(t, fmt.Sprintf("%v %+v %#v %v", d, d, in, in.Account))
}

func TestDeviceDenied(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	d, err := s.StartDevice(context.Background(), readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.srv.DenyDevice(d.UserCode); err != nil {
		t.Fatal(err)
	}
	_, err = s.PollDevice(context.Background(), d)
	if !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("PollDevice = %v, want access_denied", err)
	}
	if n := co.srv.Served("access_denied"); n != 1 || len(co.slept()) != 1 {
		t.Errorf("access_denied served %d times after %d waits: the agent polled on", n, len(co.slept()))
	}
	if s.Info().SignedIn {
		t.Error("a declined sign-in signed the Session in")
	}
}

func TestDeviceExpired(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	d, err := s.StartDevice(context.Background(), []string{"poppy:read"})
	if err != nil {
		t.Fatal(err)
	}
	co.setOnSleep(func(n int) {
		if n == 2 {
			co.srv.ExpireDevice(d.UserCode)
		}
	})
	_, err = s.PollDevice(context.Background(), d)
	if !errors.Is(err, ErrExpiredToken) {
		t.Fatalf("PollDevice = %v, want expired_token", err)
	}
	if n := len(co.slept()); n != 2 {
		t.Errorf("polls = %d, want 2 (pending, then expired_token, then none)", n)
	}
}

// TestDeviceExpiresLocally: past expires_in the agent stops without polling.
func TestDeviceExpiresLocally(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	started := len(co.tokenForms()) // the start, with its nonce retry
	d, err := s.StartDevice(context.Background(), []string{"poppy:read"})
	if err != nil {
		t.Fatal(err)
	}
	co.clock.Advance(d.ExpiresAt.Sub(co.clock.Now()))
	if _, err := s.PollDevice(context.Background(), d); !errors.Is(err, ErrExpiredToken) {
		t.Fatalf("PollDevice = %v", err)
	}
	if n := len(co.tokenForms()) - started; n != 0 {
		t.Errorf("token requests after the start = %d, want none", n)
	}
}

// TestDeviceSlowDown: slow_down adds five seconds to this and every later wait.
func TestDeviceSlowDown(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	d, err := s.StartDevice(context.Background(), []string{"poppy:read"})
	if err != nil {
		t.Fatal(err)
	}
	co.srv.SlowDown(1)
	co.setOnSleep(func(n int) {
		if n == 3 {
			co.srv.ApproveDevice(d.UserCode, "acct_dana")
		}
	})
	if _, err := s.PollDevice(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Second, 6 * time.Second, 6 * time.Second}
	if got := co.slept(); !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

// TestDeviceCanceled: the poll loop ends with its context.
func TestDeviceCanceled(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	d, err := s.StartDevice(context.Background(), []string{"poppy:read"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	co.setOnSleep(func(n int) {
		if n == 2 {
			cancel()
		}
	})
	if _, err := s.PollDevice(ctx, d); !errors.Is(err, context.Canceled) {
		t.Fatalf("PollDevice = %v", err)
	}
}

func TestDeviceRefusesBadScopes(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	for _, scopes := range [][]string{nil, {""}, {"a b"}, {`x"`}} {
		if _, err := s.StartDevice(context.Background(), scopes); err == nil {
			t.Errorf("StartDevice(%q) succeeded", scopes)
		}
	}
	if _, err := s.StartDevice(context.Background(), []string{"addresses"}); !errors.Is(err, ErrInvalidScope) {
		t.Errorf("a scope Device Sign-In does not offer: %v", err)
	}
}

// TestDeviceAccountMismatch: a Session signed in to one account is replaced
// by a new Session when the User approves another account.
func TestDeviceAccountMismatch(t *testing.T) {
	co := newSignInCo(t, nil)
	s := co.start(t)
	first := co.signInDevice(t, s, "acct_dana", []string{"poppy:read"})
	second := co.signInDevice(t, s, "acct_sam", []string{"poppy:read"})
	if second.SessionID == first.SessionID || s.Info().ID != second.SessionID || !s.Info().SignedIn {
		t.Fatalf("after account_mismatch: first %s, second %s, Session %+v", first.SessionID, second.SessionID, s.Info())
	}
	if n := co.srv.Served("account_mismatch"); n != 1 {
		t.Errorf("account_mismatch served %d times", n)
	}
}

func TestParseDeviceAuthorization(t *testing.T) {
	now := time.Unix(1790900000, 0)
	good := `{"device_code":"GmRh","user_code":"WDJB-MJHT","verification_uri":"https://auth.example.com/device","expires_in":600}`
	d, err := parseDeviceAuthorization([]byte(good), now)
	if err != nil || d.Interval != defaultInterval || !d.ExpiresAt.Equal(now.Add(10*time.Minute)) || d.VerificationURIComplete != "" {
		t.Fatalf("parse = %+v, %v", d, err)
	}
	for _, bad := range []string{
		`{"user_code":"A","verification_uri":"https://a.example/d","expires_in":1}`,
		`{"device_code":"x","verification_uri":"https://a.example/d","expires_in":1}`,
		`{"device_code":"x","user_code":"A B","verification_uri":"https://a.example/d","expires_in":1}`,
		`{"device_code":"x","user_code":"A","verification_uri":"http://a.example/d","expires_in":1}`,
		`{"device_code":"x","user_code":"A","verification_uri":"https://a.example/d","expires_in":0}`,
		`{"device_code":"x","user_code":"A","verification_uri":"https://a.example/d"}`,
		`{"device_code":"x","user_code":"A","verification_uri":"https://a.example/d","expires_in":5,"verification_uri_complete":"javascript:x"}`,
		`[]`,
	} {
		if _, err := parseDeviceAuthorization([]byte(bad), now); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	huge := `{"device_code":"x","user_code":"A","verification_uri":"https://a.example/d","expires_in":99999999999,"interval":99999999999}`
	if d, err := parseDeviceAuthorization([]byte(huge), now); err != nil || d.Interval != maxInterval || d.ExpiresAt.After(now.Add(maxDeviceLife)) {
		t.Errorf("huge values: %+v %v", d, err)
	}
}

func FuzzParseDeviceAuthorization(f *testing.F) {
	f.Add([]byte(`{"device_code":"GmRh","user_code":"WDJB-MJHT","verification_uri":"https://auth.example.com/device","verification_uri_complete":"https://auth.example.com/device?user_code=WDJB-MJHT","expires_in":600,"interval":5}`))
	f.Add([]byte(`{"device_code":"","expires_in":-1,"interval":-5}`))
	f.Add([]byte(`{"device_code":"x","user_code":"\u0000","verification_uri":"https://a/","expires_in":1e308}`))
	now := time.Unix(1790900000, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := parseDeviceAuthorization(body, now)
		if err != nil {
			return
		}
		if d.Interval <= 0 || d.Interval > maxInterval || !d.ExpiresAt.After(now) || d.deviceCode.IsZero() || !printable(d.UserCode) {
			t.Errorf("accepted a bad authorization: %+v", d)
		}
		shown := fmt.Sprintf("%v %+v %#v %v", d, d, d, *d)
		if dc := d.deviceCode.Reveal(); len(dc) >= 8 && !strings.Contains(d.UserCode+d.VerificationURI+d.VerificationURIComplete, dc) && strings.Contains(shown, dc) {
			t.Error("the device code shows")
		}
	})
}

var _ = poppytest.Options{}
