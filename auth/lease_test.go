package auth

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// slowTransport delays every request a little, widening the window in which
// two processes could both send the same Account Token.
type slowTransport struct{ base http.RoundTripper }

func (t slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(3 * time.Millisecond)
	return t.base.RoundTrip(r)
}

// otherProcess is a second agent on its own Store of the same state
// directory, as a second poppy-mcp process is: the same keys and User, the
// same Account Token, nothing shared in memory.
func (co *signInCo) otherProcess(t *testing.T) *Agent {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, co.st.Dir(), &store.Options{Key: bytes.Repeat([]byte{3}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, err := NewIdentity(ctx, co.agent.Identity().ClientID(), &IdentityOptions{Store: st, RedirectURIs: []string{testRedirect}})
	if err != nil {
		t.Fatal(err)
	}
	id.now = co.clock.Now
	a := New(id, &Options{HTTPClient: &http.Client{Transport: slowTransport{co.srv.Transport()}}, Store: st})
	a.now = co.clock.Now
	return a
}

// TestTwoProcessesRaceARotatingRefresh: two processes sharing the state
// refresh one Account Token that the Company rotates on every use, at once
// and many times. Each refresh must send the newest token: without the lease
// both read the same one, the second use is refused with invalid_grant
// (poppytest reports it as a violation), and the token is dropped, lost. With
// it, none is refused and the token kept at the end still works.
func TestTwoProcessesRaceARotatingRefresh(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, &poppytest.Options{RotateRefreshTokens: true})
	co.agent.base = &http.Client{Transport: slowTransport{co.srv.Transport()}}
	co.agent.tokenHTTP = &http.Client{Transport: slowTransport{co.srv.Transport()},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	first, _ := co.heldIn(t, "poppy:read")
	other := co.otherProcess(t)
	second, err := other.Open(ctx, co.c, testUser, first.Info().ID)
	if err != nil || !second.Info().SignedIn {
		t.Fatalf("the other process: %+v %v", second.Info(), err)
	}
	const rounds = 6
	var wg sync.WaitGroup
	errs := make(chan error, 4*rounds)
	for _, s := range []*Session{first, second, first, second} {
		wg.Go(func() {
			for range rounds {
				if err := s.Renew(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("renewal: %v", err)
	}
	if n := co.srv.Served("invalid_grant"); n != 0 {
		t.Errorf("invalid_grant served %d times: a replaced Account Token was sent", n)
	}
	for _, s := range []*Session{first, second} {
		if !s.Info().SignedIn {
			t.Errorf("Session %+v signed out: the Account Token was lost", s.Info())
		}
	}
	third, err := co.otherProcess(t).Open(ctx, co.c, testUser, "")
	if err != nil || !third.Info().SignedIn {
		t.Errorf("a third process with the token kept: %+v %v", third.Info(), err)
	}
}

// TestTwoProcessesShareASession: two processes continue one Session, each
// renewing it for itself. Each renewal supersedes the other's Session Token,
// which the Company refuses as soon as the new one is used (poppytest does,
// with no grace); each process then renews once and goes on, so every
// request of both succeeds and no stale token is ever sent twice.
func TestTwoProcessesShareASession(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	first := co.start(t)
	second, err := co.otherProcess(t).Open(ctx, co.c, testUser, first.Info().ID)
	if err != nil || second.Info().ID != first.Info().ID {
		t.Fatalf("the other process: %+v %v", second.Info(), err)
	}
	for i := range 6 {
		s := []*Session{first, second}[i%2]
		if c := mustWhoami(t, co.company, s); c.SessionID != first.Info().ID {
			t.Fatalf("request %d: Session %s", i, c.SessionID)
		}
	}
	if n := co.srv.Served("invalid_token"); n == 0 {
		t.Error("no token was refused: the test proves nothing")
	}
}

// TestRotationAfterTheLeaseWasLost: a process paused during a refresh
// (here: another process takes the Account Token's lease meanwhile, as it
// does once the lease expired) cannot store the rotated token it then
// gets: the write is fenced by the lease, and the error says the lease was
// lost. The other process's token stays kept. On the old code the paused
// process overwrote it.
func TestRotationAfterTheLeaseWasLost(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	const iss = "https://auth.example.com"
	if err := st.PutAccountToken(ctx, store.AccountToken{Issuer: iss, UserID: testUser, Account: DefaultAccountLabel,
		Token: store.NewSecretString("rt-1")}); err != nil {
		t.Fatal(err)
	}
	acct, err := LoadAccount(ctx, st, iss, testUser, DefaultAccountLabel)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acct.refresh(ctx, func(ctx context.Context, _ Secret) (*Token, error) {
		// Paused here; the other process takes over and rotates.
		l, err := st.TakeLease(ctx, leaseName(iss, testUser, DefaultAccountLabel), "the other process", time.Minute)
		if err == nil {
			err = st.Fenced(l).PutAccountToken(ctx, store.AccountToken{Issuer: iss, UserID: testUser,
				Account: DefaultAccountLabel, Token: store.NewSecretString("rt-other")})
		}
		if err != nil {
			t.Fatal(err)
		}
		return &Token{RefreshToken: NewSecret("rt-stale")}, nil
	})
	if !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "lost the lease") {
		t.Fatalf("refresh after the lease was lost: %v, want it lost", err)
	}
	if kept, err := st.AccountToken(ctx, iss, testUser, DefaultAccountLabel); err != nil || kept.Token.RevealString() != "rt-other" {
		t.Errorf("kept token after the stale rotation: %v; want the other process's", err)
	}
}
