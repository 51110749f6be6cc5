package auth

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// company is a poppytest Company and an Agent registered with it.
type company struct {
	srv   *poppytest.Server
	agent *Agent
	c     Company
	clock *fakeClock // nil: real time
}

const testUser = "usr_Q7c1vK"

// newCompany starts a Company. With clock, the Company, the identity and
// the agent share that clock.
func newCompany(t testing.TB, opts *poppytest.Options, clock *fakeClock, store SecretStore) *company {
	t.Helper()
	if opts == nil {
		opts = &poppytest.Options{}
	}
	if clock != nil {
		clock.t = time.Now() // poppytest's certificates are valid around real time
		opts.Now = clock.Now
	}
	srv := poppytest.NewServer(t, opts)
	id, err := NewIdentity(context.Background(), "https://"+srv.AgentHost()+"/agent.json", &IdentityOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if clock != nil {
		id.now = clock.Now
	}
	registerAgent(t, srv, id)
	a := New(id, &Options{HTTPClient: srv.Client(), Store: store})
	if clock != nil {
		a.now = clock.Now
	}
	d := srv.Domain()
	c := Company{
		Issuer:        srv.Issuer(),
		Domain:        d,
		TokenEndpoint: srv.URL("auth."+d, "/oauth/token"),
		MCPServers:    []string{srv.URL("mcp."+d, "/mcp")},
	}
	return &company{srv: srv, agent: a, c: c, clock: clock}
}

// newBubbleCompany is newCompany on an in-memory network of its own, for a
// test in a testing/synctest bubble: Retry-After holds and renewals pass
// on the bubble's clock (docs/testing.md).
func newBubbleCompany(t testing.TB, opts *poppytest.Options, clock *fakeClock, store SecretStore) *company {
	t.Helper()
	var o poppytest.Options
	if opts != nil {
		o = *opts
	}
	n := &memnet.Network{}
	o.Listen, o.Dial = n.Listen, n.DialContext
	return newCompany(t, &o, clock, store)
}

func registerAgent(t testing.TB, srv *poppytest.Server, id *Identity) {
	t.Helper()
	agentJSON, err := id.AgentJSON()
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := id.JWKSJSON()
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAgentDocuments(agentJSON, jwks)
}

func (co *company) start(t *testing.T) *Session {
	t.Helper()
	s, err := co.agent.StartSession(context.Background(), co.c, testUser)
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	return s
}

func (co *company) whoamiURL() string { return co.srv.URL("api."+co.srv.Domain(), "/poppy/whoami") }

func (co *company) tokenRequests() int {
	return co.srv.Count("auth."+co.srv.Domain(), "/oauth/token")
}

// caller is poppytest's view of who made a request.
type caller struct {
	SessionID string   `json:"session_id"`
	ClientID  string   `json:"client_id"`
	UserID    string   `json:"user_id"`
	SignedIn  bool     `json:"signed_in"`
	Scopes    []string `json:"scopes"`
	TokenType string   `json:"token_type"`
	Resource  string   `json:"resource"`
}

// whoami GETs /poppy/whoami through the Session and returns the caller.
func whoami(ctx context.Context, t *testing.T, co *company, s *Session) (caller, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, co.whoamiURL()+"?q=1#frag", nil)
	resp, err := s.Client().Do(req)
	if err != nil {
		return caller{}, err
	}
	defer resp.Body.Close()
	var c caller
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("whoami: HTTP %d %s %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c, nil
}

func mustWhoami(t *testing.T, co *company, s *Session) caller {
	t.Helper()
	c, err := whoami(context.Background(), t, co, s)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	return c
}

func TestStartSession(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	before := time.Now()
	s := co.start(t)
	info := s.Info()
	if info.ID == "" || info.SignedIn || len(info.Scopes) != 0 {
		t.Errorf("info = %+v", info)
	}
	if info.ExpiresAt.Before(before.Add(59*time.Minute)) || info.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Errorf("ExpiresAt = %v, want in an hour", info.ExpiresAt)
	}
	c := mustWhoami(t, co, s)
	if c.SessionID != info.ID || c.UserID != testUser || c.ClientID != co.agent.Identity().ClientID() || c.TokenType != "DPoP" {
		t.Errorf("whoami = %+v", c)
	}
	if n := co.srv.Served("session_token"); n != 1 {
		t.Errorf("session tokens issued = %d, want 1", n)
	}
	// Nothing a program might print about a Session shows a secret.
	shown := fmt.Sprintf("%v %+v %#v %v %+v %#v", s, s.Info(), s.Info(), s.cell.current(), *s.cell.current(), s.proof)
	j, _ := json.Marshal(s.cell.current())
	shown += string(j)
	for _, secret := range co.srv.IssuedSecrets() {
		if strings.Contains(shown, secret) {
			t.Errorf("a secret the Company issued or received is shown: %s", shown)
		}
	}
	if len(co.srv.IssuedSecrets()) == 0 {
		t.Error("poppytest listed no secrets to look for")
	}
}

func TestSeveralSessionsPerUser(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s1, s2 := co.start(t), co.start(t)
	if s1.Info().ID == s2.Info().ID {
		t.Fatal("two Sessions share an ID")
	}
	if s1.proof != s2.proof {
		t.Error("one User at one Company got two DPoP keys")
	}
	if mustWhoami(t, co, s1).SessionID != s1.Info().ID || mustWhoami(t, co, s2).SessionID != s2.Info().ID {
		t.Error("a request went out in the wrong Session")
	}
	other, err := co.agent.StartSession(context.Background(), co.c, "usr_other")
	if err != nil {
		t.Fatal(err)
	}
	if other.proof == s1.proof {
		t.Error("two Users share a DPoP key")
	}
}

func TestRenewBeforeExpiry(t *testing.T) {
	clock := newClock()
	co := newCompany(t, &poppytest.Options{TokenLifetime: 10 * time.Minute}, clock, nil)
	s := co.start(t)
	id := s.Info().ID
	mustWhoami(t, co, s)
	started := co.tokenRequests()                  // the start, with its nonce retry
	clock.Advance(10*time.Minute - 20*time.Second) // within the 30 s margin
	if c := mustWhoami(t, co, s); c.SessionID != id {
		t.Errorf("renewal changed the Session: %s -> %s", id, c.SessionID)
	}
	if n := co.tokenRequests() - started; n != 1 {
		t.Errorf("token requests after the start = %d, want 1 (the renewal)", n)
	}
	if n := co.srv.Served("invalid_token"); n != 0 {
		t.Errorf("invalid_token served %d times: the renewal was not early", n)
	}
	if got, want := s.Info().ExpiresAt, clock.Now().Add(10*time.Minute); !got.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", got, want)
	}
}

func TestInvalidTokenRenewsAndRetries(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s := co.start(t)
	started := co.tokenRequests() // the start, with its nonce retry
	co.srv.ExpireTokens()
	c := mustWhoami(t, co, s)
	if c.SessionID != s.Info().ID {
		t.Errorf("session changed")
	}
	if n := co.srv.Served("invalid_token"); n != 1 {
		t.Errorf("invalid_token served %d times, want 1", n)
	}
	if n := co.tokenRequests() - started; n != 1 {
		t.Errorf("token requests after the start = %d, want 1 (the renewal)", n)
	}
}

func TestInvalidSessionStartsANewOne(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s := co.start(t)
	old := s.Info().ID
	if !co.srv.EndSession(old) {
		t.Fatal("EndSession: no such Session")
	}
	c := mustWhoami(t, co, s)
	if c.SessionID == old || c.SessionID != s.Info().ID {
		t.Errorf("whoami Session %s, info %s, old %s", c.SessionID, s.Info().ID, old)
	}
	if n := co.srv.Served("invalid_session"); n != 1 {
		t.Errorf("invalid_session served %d times, want 1", n)
	}
}

func TestResumeSession(t *testing.T) {
	store := teststore.Open(t)
	co := newCompany(t, nil, nil, store)
	s := co.start(t)
	// A restart: a new Agent on the same store.
	a2 := New(co.agent.Identity(), &Options{HTTPClient: co.srv.Client(), Store: store})
	s2, err := a2.ResumeSession(context.Background(), co.c, testUser, s.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Info().ID != s.Info().ID || s2.proof.Thumbprint() != s.proof.Thumbprint() {
		t.Errorf("resumed %s (key %s), want %s (key %s)", s2.Info().ID, s2.proof.Thumbprint(), s.Info().ID, s.proof.Thumbprint())
	}
	mustWhoami(t, co, s2)
	co.srv.EndSession(s.Info().ID)
	s3, err := a2.ResumeSession(context.Background(), co.c, testUser, s.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	if s3.Info().ID == s.Info().ID {
		t.Error("resuming an ended Session did not start a new one")
	}
}

func TestNonceRequiredAndRotated(t *testing.T) {
	co := newCompany(t, nil, nil, nil) // nonces are required by default
	s := co.start(t)
	// The token endpoint asked once for a nonce, and the retry was accepted.
	if n := co.srv.Served("use_dpop_nonce"); n != 1 {
		t.Fatalf("use_dpop_nonce served %d times at start, want 1", n)
	}
	mustWhoami(t, co, s) // api host has its own nonce: one more retry
	mustWhoami(t, co, s) // the nonce is known now
	if n := co.srv.Served("use_dpop_nonce"); n != 2 {
		t.Errorf("use_dpop_nonce served %d times, want 2", n)
	}
	co.srv.RotateNonce()
	mustWhoami(t, co, s)
	if n := co.srv.Served("use_dpop_nonce"); n != 3 {
		t.Errorf("after rotation use_dpop_nonce served %d times, want 3", n)
	}
	if err := s.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := co.srv.Served("use_dpop_nonce"); n != 4 {
		t.Errorf("after renewal use_dpop_nonce served %d times, want 4", n)
	}
}

func TestConcurrentRequestsRenewOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expire func(co *company)
	}{
		{"rejected", func(co *company) { co.srv.ExpireTokens() }},
		{"expiring", func(co *company) { co.clock.Advance(time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co := newCompany(t, nil, newClock(), nil)
			s := co.start(t)
			started := co.tokenRequests() // the start, with its nonce retry
			tc.expire(co)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					c, err := whoami(context.Background(), t, co, s)
					if err == nil && c.SessionID != s.Info().ID {
						err = errors.New("wrong session")
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if n := co.tokenRequests() - started; n != 1 {
				t.Errorf("token requests after the start = %d, want 1: one renewal for 8 requests", n)
			}
		})
	}
}

func TestRateLimitOnAPI(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil, nil)
		s := co.start(t)
		api := "api." + co.srv.Domain()
		co.srv.RateLimit(api, "/poppy/whoami", 1, time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := whoami(ctx, t, co, s); err != nil {
			t.Fatalf("a request with time to wait failed: %v", err)
		}
		if n, m := co.srv.Served("rate_limited"), co.srv.Count(api, "/poppy/whoami"); n != 1 || m != 2 {
			t.Errorf("rate_limited %d, whoami requests %d; want 1 and 2 (the retry)", n, m)
		}

		co.srv.RateLimit(api, "/poppy/whoami", 1, time.Hour)
		short, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel2()
		_, err := whoami(short, t, co, s)
		var ra *RetryAfterError
		if !errors.As(err, &ra) || ra.Wait < 59*time.Minute || ra.Endpoint != "https://"+api+"/poppy/whoami" {
			t.Fatalf("err = %v, want *RetryAfterError for an hour", err)
		}
		sent := co.srv.Count(api, "/poppy/whoami")
		// Anyone else asking now fails at once, without sending.
		_, err = whoami(short, t, co, s)
		if !errors.As(err, &ra) {
			t.Fatalf("second caller: err = %v", err)
		}
		if m := co.srv.Count(api, "/poppy/whoami"); m != sent {
			t.Errorf("%d requests sent during the limit", m-sent)
		}
		// Other endpoints are not held back.
		if _, err := co.agent.StartSession(short, co.c, testUser); err != nil {
			t.Errorf("token endpoint held back too: %v", err)
		}
	})
}

func TestRateLimitOnTokenEndpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		co := newBubbleCompany(t, nil, nil, nil)
		auth := "auth." + co.srv.Domain()
		co.srv.RateLimit(auth, "/oauth/token", 1, time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := co.agent.StartSession(ctx, co.c, testUser); err != nil {
			t.Fatalf("StartSession with time to wait: %v", err)
		}
		if n := co.srv.Served("rate_limited"); n != 1 || co.tokenRequests() != 2 {
			t.Errorf("rate_limited %d, token requests %d; want 1 and 2", n, co.tokenRequests())
		}
		co.srv.RateLimit(auth, "/oauth/token", 1, time.Hour)
		_, err := co.agent.StartSession(ctx, co.c, testUser)
		var ra *RetryAfterError
		if !errors.As(err, &ra) {
			t.Fatalf("err = %v, want *RetryAfterError", err)
		}
		sent := co.tokenRequests()
		s2, err := co.agent.StartSession(ctx, co.c, testUser)
		if !errors.As(err, &ra) || s2 != nil || co.tokenRequests() != sent {
			t.Errorf("a Session was requested during the limit: %v", err)
		}
	})
}

func TestRedirectsStayOnOrigin(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	s := co.start(t)
	d := co.srv.Domain()
	co.srv.HandleFunc("api."+d, "GET /away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, co.srv.URL("www."+d, "/elsewhere"), http.StatusFound)
	})
	co.srv.HandleFunc("api."+d, "GET /here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/poppy/whoami", http.StatusFound)
	})
	resp, err := s.Client().Get(co.srv.URL("api."+d, "/away"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || co.srv.Count("www."+d, "/elsewhere") != 0 {
		t.Errorf("a cross-origin redirect was followed: %d", resp.StatusCode)
	}
	resp, err = s.Client().Get(co.srv.URL("api."+d, "/here"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a same-origin redirect: HTTP %d", resp.StatusCode)
	}
}

func TestCompanyChecked(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	bad := co.c
	bad.TokenEndpoint = "http://" + url.PathEscape("auth.example.com") + "/oauth/token"
	if _, err := co.agent.StartSession(context.Background(), bad, testUser); err == nil {
		t.Error("an http token endpoint was used")
	}
	if _, err := co.agent.StartSession(context.Background(), co.c, ""); err == nil {
		t.Error("a Session without a User ID was started")
	}
}

// BenchmarkWhoami compares a GET of /poppy/whoami through the Session
// transport (token, fresh DPoP proof, and poppytest's verification of it)
// with the same GET of an unauthenticated twin, /poppy/whoami-open, that
// answers the same JSON through poppytest's bare client. "session-open"
// sends the twin through the Session transport: the agent's own cost,
// without the Company's proof verification.
func BenchmarkWhoami(b *testing.B) {
	co := newCompany(b, nil, nil, nil)
	s, err := co.agent.StartSession(context.Background(), co.c, testUser)
	if err != nil {
		b.Fatal(err)
	}
	d := co.srv.Domain()
	body, _ := json.Marshal(caller{SessionID: s.Info().ID, ClientID: co.agent.Identity().ClientID(), UserID: testUser, TokenType: "DPoP"})
	co.srv.HandleFunc("api."+d, "GET /poppy/whoami-open", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	run := func(b *testing.B, hc *http.Client, u string) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := hc.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("HTTP %d", resp.StatusCode)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, co.srv.Client(), co.srv.URL("api."+d, "/poppy/whoami-open")) })
	b.Run("session-open", func(b *testing.B) { run(b, s.Client(), co.srv.URL("api."+d, "/poppy/whoami-open")) })
	b.Run("session", func(b *testing.B) { run(b, s.Client(), co.whoamiURL()) })
}

func TestSessionBrowserAssertion(t *testing.T) {
	co := newCompany(t, nil, nil, nil)
	d := co.srv.Domain()
	co.c.BrowserSessionEndpoint = co.srv.URL(d, "/poppy/browser-session")
	s := co.start(t)
	as, err := s.BrowserAssertion("https://www." + d + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	hdr, c := verifyJWS(t, as.Reveal(), co.agent.Identity().JWKS().Keys[0].Key.(*ecdsa.PublicKey))
	if hdr.ExtraHeaders["typ"] != TypeBrowser || c["session_id"] != s.Info().ID || c["sub"] != testUser ||
		c["aud"] != co.c.BrowserSessionEndpoint || c["return_to"] != "https://www."+d+"/orders" {
		t.Errorf("header %v, claims %v", hdr.ExtraHeaders, c)
	}
	for _, bad := range []string{"https://evil.example/", "http://" + d + "/", "https://not" + d + "/", "/orders"} {
		if _, err := s.BrowserAssertion(bad); err == nil {
			t.Errorf("return_to %q accepted", bad)
		}
	}
}
