package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// hostedDeployment is `serve --auth-issuer` behind a TLS reverse proxy at
// poppytest's agent host (the public URL), with a real authorization server
// (internal/oidctest) that issues its access tokens and signs browsers in.
// It has one replica or more: on PostgreSQL (--store) they share one
// database and one POPPY_STATE_KEY, as every replica of a deployment must,
// and the public URL's requests go to each replica in turn, as a load
// balancer would send them.
type hostedDeployment struct {
	srv      *poppytest.Server
	idp      *oidctest.Provider
	public   string // --public-url
	stateKey string // POPPY_STATE_KEY, base64
	store    string // --store; "" for SQLite in the first replica's state directory
	replicas []hostedReplica
	next     atomic.Int64 // round robin of the public URL's requests
	pinned   atomic.Int64 // 1 + the replica every public request goes to; 0: round robin
}

// pin sends every request of the public URL to replica i from now on, as
// a load balancer without stickiness may; -1 goes back to round robin.
func (h *hostedDeployment) pin(i int) { h.pinned.Store(int64(i + 1)) }

// hostedReplica is one `serve` process of a hosted deployment.
type hostedReplica struct {
	mcpURL string          // where it listens, on loopback
	state  string          // its --state-dir
	logged *testlog.Buffer // its stderr
	pages  string          // its --pages-addr, when deploymentOptions.PagesAddrs
	proc   *exec.Cmd       // the process, for a test that kills it
	down   *atomic.Bool    // killed: the public URL no longer leads to it
}

// deploymentOptions shape a hosted deployment; the zero value is one replica
// on SQLite reaching poppytest's example.com alone.
type deploymentOptions struct {
	// Others are more Companies poppy-mcp can reach (their names mapped,
	// their CAs trusted, the agent's documents served to them on their
	// agent host).
	Others []*poppytest.Server
	// Replicas is how many `serve` processes run; 0 is one.
	Replicas int
	// Store is the --store URL every replica uses; "" is SQLite in the
	// state directory, which the replicas then share.
	Store string
	// Direct publishes the Direct Sign-In callback in redirect_uris.
	Direct bool
	// PagesAddrs gives each replica a --pages-addr of its own, known to
	// the test (hostedReplica.pages).
	PagesAddrs bool
}

func startHosted(t *testing.T, extra ...string) *hostedDeployment {
	t.Helper()
	return startHostedWith(t, nil, extra...)
}

// startHostedWith starts a hosted deployment shaped by opts (nil is the
// zero deploymentOptions); extra are more flags of every replica's serve.
func startHostedWith(t *testing.T, opts *deploymentOptions, extra ...string) *hostedDeployment {
	t.Helper()
	if opts == nil {
		opts = &deploymentOptions{}
	}
	srv := poppytest.NewServer(t, nil)
	idp := oidctest.New(t, nil)
	h := &hostedDeployment{srv: srv, idp: idp, public: "https://" + srv.AgentHost(), stateKey: newKey(), store: opts.Store}
	idp.AddClient(oidctest.Client{ID: "claude", RedirectURIs: []string{"https://client.test/cb"}, Audience: []string{h.public + "/mcp"}})
	idp.AddClient(oidctest.Client{ID: "poppy-pages", Secret: "pages-secret-0123456789", RedirectURIs: []string{h.public + "/auth/callback"}})
	env, resolve := h.environment(t, opts.Others)
	state := t.TempDir()
	initArgs := []string{"init", "--out", t.TempDir(), "--client-id", h.public + "/agent.json"}
	if opts.Direct {
		initArgs = append(initArgs, "--redirect-uri", h.public+"/oauth/callback")
	}
	if _, errOut, code := runBinary(t, env, append(initArgs, h.storeArgs(state)...)...); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	for i := range max(opts.Replicas, 1) {
		if i > 0 && h.store != "" { // on PostgreSQL each replica has a state directory of its own
			state = t.TempDir()
		}
		args := append([]string{"serve", "--log-level", "debug", "--http", "127.0.0.1:0", "--public-url", h.public,
			"--auth-issuer", idp.Issuer(), "--auth-client-id", "poppy-pages", "--resolve", idp.Host() + ":443:" + idp.Addr()},
			append(h.storeArgs(state), resolve...)...)
		pagesAddr := ""
		if opts.PagesAddrs {
			pagesAddr = freeLoopback(t)
			args = append(args, "--pages-addr", pagesAddr)
		}
		proc, u, logged := startProcess(t, env, append(args, extra...)...)
		h.replicas = append(h.replicas, hostedReplica{mcpURL: u, state: state, logged: logged, proc: proc, down: &atomic.Bool{}, pages: pagesAddr})
	}
	srv.Handle(srv.AgentHost(), "/", &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		replica := h.replicas[int(h.next.Add(1)-1)%len(h.replicas)]
		for i := 0; replica.down.Load() && i < len(h.replicas); i++ { // as a load balancer's health check would
			replica = h.replicas[int(h.next.Add(1)-1)%len(h.replicas)]
		}
		if p := h.pinned.Load(); p > 0 {
			replica = h.replicas[p-1]
		}
		target, _ := url.Parse(strings.TrimSuffix(replica.mcpURL, "/mcp"))
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}})
	if len(opts.Others) > 0 {
		agentJSON, jwks := h.published(t, "/agent.json"), h.published(t, "/jwks.json")
		for _, o := range opts.Others {
			o.SetAgentDocuments(agentJSON, jwks)
		}
	}
	return h
}

// freeLoopback is a loopback address with a port free just now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// environment is the replicas' environment (every Company's and the
// issuer's CA trusted, as an operator's bundle would have them; the state
// key; the pages' client secret) and the --resolve flags that reach the
// Companies.
func (h *hostedDeployment) environment(t *testing.T, others []*poppytest.Server) ([]string, []string) {
	t.Helper()
	_, resolve := companyArgs(t, h.srv)
	cas := append(h.srv.CAPEM(), h.idp.CAPEM()...)
	for _, o := range others {
		_, more := companyArgs(t, o)
		resolve = append(resolve, more...)
		cas = append(cas, o.CAPEM()...)
	}
	ca := filepath.Join(t.TempDir(), "cas.pem")
	if err := os.WriteFile(ca, cas, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"SSL_CERT_FILE=" + ca, "POPPY_STATE_KEY=" + h.stateKey, "POPPY_AUTH_CLIENT_SECRET=pages-secret-0123456789"}, resolve
}

// storeArgs are the flags that give a process the deployment's state.
func (h *hostedDeployment) storeArgs(state string) []string {
	if h.store == "" {
		return []string{"--state-dir", state}
	}
	return []string{"--state-dir", state, "--store", h.store}
}

// logged is what every replica wrote, for a failure message.
func (h *hostedDeployment) logged() string {
	var b strings.Builder
	for i, r := range h.replicas {
		fmt.Fprintf(&b, "replica %c:\n%s\n", 'A'+i, r.logged.String())
	}
	return b.String()
}

// logIDs are the deployment's log IDs, keyed by the secret its state keeps,
// as serve keys them.
func (h *hostedDeployment) logIDs(t *testing.T) *mcpauth.LogIDs {
	t.Helper()
	ctx := context.Background()
	key, _ := base64.StdEncoding.DecodeString(h.stateKey)
	var st *store.Store
	var err error
	if h.store == "" {
		st, err = store.Open(ctx, h.replicas[0].state, &store.Options{Key: key, Keychain: store.NoKeychain{}})
	} else {
		st, err = store.OpenPostgres(ctx, h.store, &store.Options{Key: key})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	secret, err := st.Secret(ctx, app.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := mcpauth.NewLogIDs(secret)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// published is the document serve publishes at path under the public URL.
func (h *hostedDeployment) published(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := h.srv.Client().Get(h.public + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return b
}

// browser is a person's browser: signed in at the issuer as person,
// reaching it and everything poppytest serves by their names.
func (h *hostedDeployment) browser(person string) *http.Client {
	jar, _ := cookiejar.New(nil)
	h.idp.SignIn(jar, person)
	idp, rest := h.idp.Transport(), h.srv.Transport()
	return &http.Client{Jar: jar, Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.URL.Host == h.idp.Host() {
			return idp.RoundTrip(r)
		}
		return rest.RoundTrip(r)
	})}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHostedRefusesAndPublishes: with --auth-issuer, /mcp answers a request
// without a token 401 with a challenge that points at its RFC 9728
// metadata under the public URL; the metadata, fetched through the public
// URL by the go-sdk client's own fetcher, names the issuer and the
// resource; a token for another resource is refused.
func TestHostedRefusesAndPublishes(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	req, _ := http.NewRequest(http.MethodPost, h.public+"/mcp", strings.NewReader(initialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	meta := h.public + "/.well-known/oauth-protected-resource/mcp"
	if resp.StatusCode != 401 || len(cs) != 1 || cs[0].Params["resource_metadata"] != meta {
		t.Fatalf("no token: %d %v", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	m, err := oauthex.GetProtectedResourceMetadata(context.Background(), meta, h.public+"/mcp", h.srv.Client())
	if err != nil || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != h.idp.Issuer() {
		t.Fatalf("metadata %+v: %v", m, err)
	}
	h.idp.AddClient(oidctest.Client{ID: "elsewhere", RedirectURIs: []string{"https://client.test/cb"}, Audience: []string{"https://other.test/mcp"}})
	if code := post(t, h.replicas[0].mcpURL, bearer(h.idp.AccessToken(t, "elsewhere", "alice"))); code != 401 {
		t.Errorf("a token for another resource: %d", code)
	}
	if _, err := os.Stat(filepath.Join(h.replicas[0].state, "http-token")); err == nil {
		t.Error("hosted mode made a bearer token")
	}
}

// TestHostedPeopleKeptApart: two people's MCP clients, each with their own
// access token from the issuer, use poppy-mcp (alice at the 2025-11-25
// revision, bob at 2026-07-28); a sign-in page opened for
// alice is refused in bob's browser (signed in with the issuer as bob) and
// opens in alice's; bob cannot use alice's MCP session; neither token, nor
// subject, nor e-mail address is logged.
func TestHostedPeopleKeptApart(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	aliceToken, bobToken := h.idp.AccessToken(t, "claude", "alice"), h.idp.AccessToken(t, "claude", "bob")
	alice, bob := connectAt(t, h.replicas[0].mcpURL, aliceToken, "2025-11-25"), connectAt(t, h.replicas[0].mcpURL, bobToken, "2026-07-28")
	got := callTool(t, alice, "sign_in_mediated", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	link, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(link, h.public+"/pages/p/") {
		t.Fatalf("sign_in_mediated = %v\nserve's log:\n%s", got, h.logged())
	}
	if d := callTool(t, bob, "discover_company", map[string]any{"domain": "example.com"}); d["domain"] != "example.com" {
		t.Fatalf("bob's discover_company = %v", d)
	}
	if code, body := openPage(t, h.browser("bob"), link); code != http.StatusForbidden || strings.Contains(body, "password") {
		t.Fatalf("bob opening alice's sign-in page: %d\n%s", code, body)
	}
	if code, body := openPage(t, h.browser("alice"), link); code != 200 || !strings.Contains(body, "<form") {
		t.Fatalf("alice opening her sign-in page: %d\n%s\nserve's log:\n%s", code, body, h.logged())
	}
	sid := alice.ID()
	if sid == "" {
		t.Fatal("alice's go-sdk session has no ID")
	}
	hdr := map[string]string{"Authorization": "Bearer " + bobToken, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	if code := postBody(t, h.replicas[0].mcpURL, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, hdr); code != http.StatusNotFound {
		t.Errorf("bob in alice's MCP session: %d, want 404", code)
	}
	logged := h.logged()
	for _, secret := range []string{aliceToken, bobToken, aliceToken[strings.LastIndex(aliceToken, ".")+1:], "alice", "bob@people.test", "pages-secret-0123456789"} {
		if strings.Contains(logged, secret) {
			t.Errorf("serve logged %.24q", secret)
		}
	}
}

// connectAt connects the go-sdk client to the MCP URL u with token, at the
// MCP revision rev.
func connectAt(t *testing.T, u, token, rev string) *sdk.ClientSession {
	t.Helper()
	return connectWith(t, u, token, rev, nil)
}

// openPage GETs u in browser b, following redirects (through the issuer's
// sign-in), and returns the last status and body.
func openPage(t *testing.T, b *http.Client, u string) (int, string) {
	t.Helper()
	got := visitPage(t, b, http.MethodGet, u, nil, "")
	return got.code, got.body
}

// visited is where a browser's request ended: the status, the URL and the
// body of the last response.
type visited struct {
	code int
	at   *url.URL
	body string
}

// visitPage sends a request for u in browser b, following redirects: a
// GET, or with form a POST from origin.
func visitPage(t *testing.T, b *http.Client, method, u string, form url.Values, origin string) visited {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequestWithContext(ctx, method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b2, _ := io.ReadAll(resp.Body)
	return visited{code: resp.StatusCode, at: resp.Request.URL, body: string(b2)}
}

// postBody posts an MCP message to u with headers and returns the status.
func postBody(t *testing.T, u, body string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHostedFlags: the hosted flags that cannot work are refused before
// anything starts, each with a line that says what to do.
func TestHostedFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--auth-issuer", "https://idp.test"}, "", "--auth-issuer needs --public-url"},
		{[]string{"--http", "127.0.0.1:0", "--public-url", "https://a.test", "--auth-issuer", "http://idp.test"}, "", "must be the authorization server's issuer"},
		{[]string{"--http", "127.0.0.1:0", "--public-url", "https://a.test", "--auth-issuer", "https://idp.test", "--http-token", "t"}, "", "replaces the bearer token"},
		{[]string{"--http", "127.0.0.1:0", "--public-url", "https://a.test", "--auth-issuer", "https://idp.test"}, "POPPY_HTTP_TOKEN=t", "replaces the bearer token"},
		{[]string{"--http", "127.0.0.1:0", "--public-url", "https://a.test", "--auth-client-id", "c"}, "", "need --auth-issuer"},
		{[]string{"--auth-issuer", "https://idp.test"}, "", "need --http and --public-url"},
	} {
		t.Setenv("POPPY_HTTP_TOKEN", strings.TrimPrefix(tc.env, "POPPY_HTTP_TOKEN="))
		if _, err := parseServe(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %s: %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
	t.Setenv("POPPY_HTTP_TOKEN", "")
	if _, err := parseServe([]string{"--http", "0.0.0.0:0", "--public-url", "https://a.test", "--auth-issuer", "https://idp.test/realm", "--auth-scope", "mcp"}, io.Discard); err != nil {
		t.Errorf("hosted off loopback without a bearer token: %v", err)
	}
}
