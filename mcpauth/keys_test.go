package mcpauth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

// TestKeyRotation: after the issuer rotates its signing key, a token signed
// with the new key is accepted, the key set fetched again once; tokens
// naming keys the issuer does not publish make it fetch again at most once
// per KeyRefreshInterval, however many arrive.
func TestKeyRotation(t *testing.T) {
	d := newDeployment(t, &mcpauth.Options{KeyRefreshInterval: 30 * time.Second})
	if resp := postMCP(t, d.client(d.idp.AccessToken(t, mcpClient, "alice")), "/mcp", initialize, nil); resp.StatusCode != 200 {
		t.Fatalf("before rotation: %d", resp.StatusCode)
	}
	fetched := d.idp.Served("/keys")
	d.skew.Store(int64(31 * time.Second)) // the first fetch is older than the interval
	d.idp.RotateKey()
	rotated := d.idp.AccessToken(t, mcpClient, "alice")
	if resp := postMCP(t, d.client(rotated), "/mcp", initialize, nil); resp.StatusCode != 200 {
		t.Fatalf("a token signed with the new key: %d", resp.StatusCode)
	}
	if n := d.idp.Served("/keys") - fetched; n != 1 {
		t.Fatalf("the new key cost %d fetches of the key set, want 1", n)
	}
	unknown := withKeyID(rotated, "made-up")
	for i := 0; i < 3; i++ {
		if resp := postMCP(t, d.client(unknown), "/mcp", initialize, nil); resp.StatusCode != 401 {
			t.Fatalf("an unknown key: %d", resp.StatusCode)
		}
	}
	if n := d.idp.Served("/keys") - fetched; n != 1 {
		t.Errorf("unknown keys within the interval fetched the key set %d more times", n-1)
	}
	d.skew.Store(int64(62 * time.Second))
	for i := 0; i < 3; i++ {
		postMCP(t, d.client(unknown), "/mcp", initialize, nil)
	}
	if n := d.idp.Served("/keys") - fetched; n != 2 {
		t.Errorf("after the interval, unknown keys fetched the key set %d times, want once", n-1)
	}
}

// withKeyID is tok with another kid in its header.
func withKeyID(tok, kid string) string {
	parts := strings.SplitN(tok, ".", 2)
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"` + kid + `","typ":"JWT"}`))
	return h + "." + parts[1]
}

// TestIssuerUnreachable: when the issuer's keys cannot be had, a token is
// answered 503 with Retry-After and no challenge: the client should try
// again later, not send its user to sign in again.
func TestIssuerUnreachable(t *testing.T) {
	d := newDeployment(t, nil)
	lonely := oidctest.New(t, &oidctest.Options{Host: "lonely.test"}) // not mapped: the guard does not reach it
	res, err := mcpauth.New(d.idp.Issuer(), resourceURL, &mcpauth.Options{Documents: d.documents(lonely)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodPost, resourceURL, strings.NewReader(initialize))
	req.Header.Set("Authorization", "Bearer "+d.idp.AccessToken(t, mcpClient, "alice"))
	res.Require(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.status != http.StatusServiceUnavailable || rec.header.Get("Retry-After") == "" || rec.header.Get("WWW-Authenticate") != "" {
		t.Errorf("unreachable issuer: %d %v", rec.status, rec.header)
	}
	if err := res.Discover(t.Context()); err == nil {
		t.Error("Discover reached an issuer it cannot reach")
	}
}

type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
func (r *recorder) WriteHeader(s int)           { r.status = s }

// TestNewRefusesUnsafeChoices: HMAC and "none" cannot be allowed, the issuer
// and the resource must be https URLs, the resource without a fragment, and
// a secret must be long enough.
func TestNewRefusesUnsafeChoices(t *testing.T) {
	for name, c := range map[string]struct {
		issuer, resource string
		opts             mcpauth.Options
	}{
		"HS256":             {"https://idp.test", resourceURL, mcpauth.Options{Algorithms: []jose.SignatureAlgorithm{jose.HS256}}},
		"none":              {"https://idp.test", resourceURL, mcpauth.Options{Algorithms: []jose.SignatureAlgorithm{"none"}}},
		"http issuer":       {"http://idp.test", resourceURL, mcpauth.Options{}},
		"issuer with query": {"https://idp.test?x=1", resourceURL, mcpauth.Options{}},
		"http resource":     {"https://idp.test", "http://agent.test/mcp", mcpauth.Options{}},
		"fragment":          {"https://idp.test", resourceURL + "#x", mcpauth.Options{}},
		"short secret":      {"https://idp.test", resourceURL, mcpauth.Options{Secret: []byte("short")}},
	} {
		if _, err := mcpauth.New(c.issuer, c.resource, &c.opts); err == nil || !strings.HasPrefix(err.Error(), "mcpauth: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestConcurrentFirstTokens: many tokens arriving at once before the keys
// are known make one fetch of the key set, not one each.
func TestConcurrentFirstTokens(t *testing.T) {
	d := newDeployment(t, nil)
	tok := d.idp.AccessToken(t, mcpClient, "alice")
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.res.Verify(context.Background(), tok); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := d.idp.Served("/keys"); n != 1 {
		t.Errorf("10 first tokens fetched the key set %d times", n)
	}
}

// TestReady: a Resource is not Ready before it has the issuer's keys, is
// Ready once it fetched them (Ready fetches them itself), and again after
// their lifetime by fetching them anew; once the issuer stops answering, it
// is not Ready when the keys it holds grow older than their lifetime.
func TestReady(t *testing.T) {
	d := newDeployment(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.res.Ready(ctx); err != nil {
		t.Fatalf("Ready, fetching the keys: %v", err)
	}
	fetched := d.idp.Served("/keys")
	if fetched == 0 {
		t.Fatal("Ready fetched no key set")
	}
	if err := d.res.Ready(ctx); err != nil || d.idp.Served("/keys") != fetched {
		t.Fatalf("Ready with fresh keys: %v, %d more fetches", err, d.idp.Served("/keys")-fetched)
	}
	d.skew.Store(int64(61 * time.Minute)) // past the keys' hour
	if err := d.res.Ready(ctx); err != nil {
		t.Fatalf("Ready with old keys and the issuer up: %v", err)
	}
	if d.idp.Served("/keys") == fetched {
		t.Fatal("old keys were not fetched again")
	}
	d.idp.Close()
	d.skew.Store(int64(122 * time.Minute))
	err := d.res.Ready(ctx)
	if !errors.Is(err, mcpauth.ErrUnavailable) {
		t.Fatalf("Ready with old keys and the issuer down: %v, want ErrUnavailable", err)
	}
}
