package auth

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

const testRedirect = "https://agent.example/oauth/callback"

// signInCo is a poppytest Company for sign-in tests: every endpoint known,
// Account Tokens kept in a real store, and the agent's waits made instant on
// a fake clock the Company shares, so poll intervals cost no real time.
type signInCo struct {
	*company
	st *store.Store

	// mu guards sleeps and onSleep.
	mu      sync.Mutex
	sleeps  []time.Duration
	onSleep func(n int) // called before the clock moves, with the count so far
}

func newSignInCo(t *testing.T, opts *poppytest.Options) *signInCo {
	t.Helper()
	o := poppytest.Options{}
	if opts != nil {
		o = *opts
	}
	if o.DeviceInterval == 0 {
		o.DeviceInterval = time.Second
	}
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), &store.Options{Key: bytes.Repeat([]byte{3}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := newClock()
	co := newCompany(t, &o, clock, st)
	// The same key from the store, now with a redirect URI for Direct Sign-In.
	id, err := NewIdentity(ctx, co.agent.Identity().ClientID(), &IdentityOptions{Store: st, RedirectURIs: []string{testRedirect}})
	if err != nil {
		t.Fatal(err)
	}
	id.now = clock.Now
	registerAgent(t, co.srv, id)
	co.agent = New(id, &Options{HTTPClient: co.srv.Client(), Store: st})
	co.agent.now = clock.Now
	auth := "auth." + co.srv.Domain()
	co.c.RevocationEndpoint = co.srv.URL(auth, "/oauth/revoke")
	co.c.AuthorizationEndpoint = co.srv.URL(auth, "/oauth/authorize")
	co.c.DeviceAuthorizationEndpoint = co.srv.URL(auth, "/oauth/device")
	co.c.MediatedEndpoint = co.srv.URL(auth, "/poppy/sign-in")
	sc := &signInCo{company: co, st: st}
	co.agent.limits.sleep = func(ctx context.Context, d time.Duration) error {
		sc.mu.Lock()
		sc.sleeps = append(sc.sleeps, d)
		n, f := len(sc.sleeps), sc.onSleep
		sc.mu.Unlock()
		if f != nil {
			f(n)
		}
		clock.Advance(d)
		return ctx.Err()
	}
	return sc
}

func (co *signInCo) slept() []time.Duration {
	co.mu.Lock()
	defer co.mu.Unlock()
	return slices.Clone(co.sleeps)
}

func (co *signInCo) setOnSleep(f func(n int)) {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.onSleep = f
}

// signInDevice signs s in by Device Sign-In, approved at once for account
// with the granted scopes (all when none).
func (co *signInCo) signInDevice(t *testing.T, s *Session, account string, scopes []string, granted ...string) *SignIn {
	t.Helper()
	d, err := s.StartDevice(context.Background(), scopes)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.srv.ApproveDevice(d.UserCode, account, granted...); err != nil {
		t.Fatal(err)
	}
	in, err := s.PollDevice(context.Background(), d)
	if err != nil {
		t.Fatalf("PollDevice: %v", err)
	}
	return in
}

// tokenForms returns the forms of the token requests so far.
func (co *signInCo) tokenForms() []url.Values {
	var out []url.Values
	for _, r := range co.srv.Requests() {
		if r.Path == "/oauth/token" {
			f, _ := url.ParseQuery(string(r.Body))
			out = append(out, f)
		}
	}
	return out
}

// grants returns the grant_type of each token request so far, shortened.
func (co *signInCo) grants() []string {
	var out []string
	for _, f := range co.tokenForms() {
		g := f.Get("grant_type")
		out = append(out, g[strings.LastIndex(g, ":")+1:])
	}
	return out
}

// account GETs the account-only endpoint through s and returns the status.
func (co *signInCo) account(t *testing.T, s *Session) (int, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, co.srv.URL("api."+co.srv.Domain(), "/account"), nil)
	resp, err := s.Client().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// kept returns the Account Token kept in the store, or "".
func (co *signInCo) kept(t *testing.T, s *Session) string {
	t.Helper()
	at, err := co.st.AccountToken(context.Background(), co.c.Issuer, s.UserID(), DefaultAccountLabel)
	if err != nil {
		return ""
	}
	return at.Token.RevealString()
}

// scanSecrets fails when a secret the Company issued or received shows in text.
func (co *signInCo) scanSecrets(t *testing.T, text string) {
	t.Helper()
	secrets := co.srv.IssuedSecrets()
	if len(secrets) == 0 {
		t.Fatal("poppytest listed no secrets to look for")
	}
	for _, s := range secrets {
		if len(s) >= 6 && strings.Contains(text, s) {
			t.Errorf("a secret the Company issued or received shows: %.10s…", s)
		}
	}
}
