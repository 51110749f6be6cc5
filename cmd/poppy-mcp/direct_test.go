package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestInitThenServeDirectSignIn: what `init` is told is what `serve`
// publishes and uses, with no --client-id. The built binary runs `init`
// with a redirect URI and a client name, then `serve --http --public-url`;
// poppytest serves agent.example (the public URL) through a TLS reverse
// proxy to it, as a deployment's proxy would. The served agent.json has the
// redirect URI, and a whole Direct Sign-In runs against poppytest through
// the callback, in a browser that shows the deployment's token once. The
// old serve published "redirect_uris": [] and client_name "poppy-mcp", so
// the Company refused the authorization request.
func TestInitThenServeDirectSignIn(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, resolve := companyArgs(t, srv)
	const token = "deployment-token-0123456789-abcdefghijklmnop"
	env = append(env, "POPPY_STATE_KEY="+newKey(), "POPPY_HTTP_TOKEN="+token)
	state, public := t.TempDir(), "https://"+srv.AgentHost()
	if _, errOut, code := runBinary(t, env, "init", "--state-dir", state, "--out", t.TempDir(), "--client-id", public+"/agent.json",
		"--redirect-uri", public+"/oauth/callback", "--client-name", "Dana's agent"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	u, logged := startLogged(t, env, append([]string{"serve", "--state-dir", state, "--http", "127.0.0.1:0", "--public-url", public}, resolve...)...)
	target, _ := url.Parse(strings.TrimSuffix(u, "/mcp"))
	srv.Handle(srv.AgentHost(), "/", &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the Host passes through, as the pages require
	}})

	var agent struct {
		ClientID     string   `json:"client_id"`
		ClientName   string   `json:"client_name"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	resp, err := srv.Client().Get(public + "/agent.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&agent)
	resp.Body.Close()
	if err != nil || agent.ClientID != public+"/agent.json" || agent.ClientName != "Dana's agent" || !slices.Equal(agent.RedirectURIs, []string{public + "/oauth/callback"}) {
		t.Fatalf("served agent.json = %+v, %v\nserve's log:\n%s", agent, err, logged.String())
	}

	cs := connectHTTP(t, u, token)
	got := callTool(t, cs, "sign_in_direct", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read", "addresses"}})
	link, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(link, public+"/pages/p/") {
		t.Fatalf("sign_in_direct = %v", got)
	}
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Transport: srv.Transport(), Jar: jar}
	consent := browse(t, b, http.MethodGet, link, nil)
	if consent.Request.URL.Host != "auth.example.com" { // the page asked for the deployment's token first
		consent = browse(t, b, http.MethodPost, link, url.Values{"poppy_credential": {token}})
	}
	state2 := consent.Request.URL.Query().Get("state")
	if consent.Request.URL.Host != "auth.example.com" || state2 == "" {
		t.Fatalf("the sign-in link led to %v", consent.Request.URL)
	}
	back, err := srv.ApproveAuthorization(state2, "acct_dana")
	if err != nil {
		t.Fatal(err)
	}
	if page := browse(t, b, http.MethodGet, back, nil); page.StatusCode != 200 {
		t.Fatalf("the callback: %d", page.StatusCode)
	}
	st := callTool(t, cs, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 5})
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status = %v\nserve's log:\n%s", st, logged.String())
	}
	if strings.Contains(logged.String(), token) {
		t.Error("serve logged the bearer token")
	}
}

// TestServeClientIDDiffers: a --client-id other than the one init stored
// wins, with a warning that says what to run.
func TestServeClientIDDiffers(t *testing.T) {
	t.Parallel()
	state, env := t.TempDir(), []string{"POPPY_STATE_KEY=" + newKey()}
	if _, errOut, code := runBinary(t, env, "init", "--state-dir", state, "--out", t.TempDir(), "--client-id", "https://agent.test/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	_, errOut, code := runBinary(t, env, "serve", "--state-dir", state, "--client-id", "https://other.test/agent.json")
	if code != 0 || !strings.Contains(errOut, "--client-id https://other.test/agent.json is not the client_id `poppy-mcp init` stored (https://agent.test/agent.json)") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if _, errOut, _ := runBinary(t, env, "serve", "--state-dir", state); strings.Contains(errOut, "no agent identity") || strings.Contains(errOut, "WARN") {
		t.Errorf("serve after init, without --client-id, warned:\n%s", errOut)
	}
}

// connectHTTP connects the go-sdk client to the MCP URL u with the bearer token.
func connectHTTP(t *testing.T, u, token string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	hc := &http.Client{Transport: headerTransport{bearer(token)}}
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns its structured content.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, _ := res.StructuredContent.(map[string]any)
	return m
}

// browse is one step of the user's browser: a GET, or a form posted from
// the page's own origin; redirects are followed with the cookies kept.
func browse(t *testing.T, b *http.Client, method, u string, form url.Values) *http.Response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		pu, _ := url.Parse(u)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", pu.Scheme+"://"+pu.Host)
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestInitKeepsMetadata: running init again for the same client_id (to
// rotate the key, say) keeps the redirect URIs and name it stored unless
// new ones are given, and says so.
func TestInitKeepsMetadata(t *testing.T) {
	t.Parallel()
	state, out, env := t.TempDir(), t.TempDir(), []string{"POPPY_STATE_KEY=" + newKey()}
	id := []string{"init", "--state-dir", state, "--out", out, "--client-id", "https://agent.test/agent.json"}
	if _, errOut, code := runBinary(t, env, append(id, "--redirect-uri", "https://agent.test/cb", "--client-name", "Mine")...); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	stdout, errOut, code := runBinary(t, env, append(id, "--rotate")...)
	var agent struct {
		ClientName   string   `json:"client_name"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	readJSON(t, out+"/agent.json", &agent)
	if code != 0 || !strings.Contains(stdout, "Kept from the last init: redirect_uris https://agent.test/cb") ||
		agent.ClientName != "Mine" || !slices.Equal(agent.RedirectURIs, []string{"https://agent.test/cb"}) {
		t.Fatalf("init again: exit %d, %s %s, agent.json %+v", code, stdout, errOut, agent)
	}
	if _, _, code := runBinary(t, env, append(id, "--redirect-uri", "https://agent.test/other")...); code != 0 {
		t.Fatal("init with a new redirect URI failed")
	}
	readJSON(t, out+"/agent.json", &agent)
	if !slices.Equal(agent.RedirectURIs, []string{"https://agent.test/other"}) {
		t.Errorf("a new --redirect-uri did not replace the stored one: %v", agent.RedirectURIs)
	}
}
