package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// curlLike is a client configured from the instructions only, as curl
// --cacert CA_FILE --connect-to ::ADDR is: it trusts the CA file and
// connects every host to the listener.
func curlLike(t *testing.T, in instructions) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(in.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("the CA file holds no certificate")
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, in.Addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

// tool calls a tool of poppy-mcp and returns its text, failing on an error.
func tool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, want string) (string, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text + "\n")
		}
	}
	var structured map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &structured)
	if res.IsError || !strings.Contains(text.String()+string(raw), want) {
		t.Fatalf("%s: isError=%v, %s %s lacks %q", name, res.IsError, text.String(), raw, want)
	}
	t.Logf("%s: %.300s", name, text.String())
	return text.String(), structured
}

// startPoppyMCP makes poppy-mcp an identity, registers it with the
// default run through the admin API, and connects to poppy-mcp over stdio
// with the run's --resolve values and the CA file.
func startPoppyMCP(t *testing.T, s *served) *sdk.ClientSession {
	t.Helper()
	state, out := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "POPPY_STATE_KEY="+strings.Repeat("Q", 43), "SSL_CERT_FILE="+s.in.CAFile)
	initCmd := exec.Command(poppyMCPBin, "init", "--state-dir", state, "--out", out, "--client-id", "https://agent.example/agent.json")
	initCmd.Env = env
	if b, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("poppy-mcp init: %v %s", err, b)
	}
	var docs agentDocs
	for file, into := range map[string]*json.RawMessage{"agent.json": &docs.Client, "jwks.json": &docs.JWKS} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		*into = b
	}
	if status := s.admin(t, "PUT", "/admin/runs/default/agent", docs, nil); status != 200 {
		t.Fatalf("registering the agent: %d", status)
	}
	args := []string{"serve", "--state-dir", state}
	for _, r := range s.in.Runs[0].Resolve {
		args = append(args, "--resolve", r)
	}
	cmd := exec.Command(poppyMCPBin, args...)
	cmd.Env = env
	cmd.Stderr = io.Discard
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "poppytest-journey", Version: "1"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestJourneyThroughServe drives poppy-mcp, as a process, through a whole
// journey against poppytest serve, as a process, using only the printed
// instructions and the admin API: discovery, a Session, device sign-in
// approved through the admin API, a conversation a person joins, an API
// call, a relayed MCP tool, joining the website (the join page fetched
// and posted by a Go client with a cookie jar, as the agent's browser),
// and sign-out. The Company finds no violation.
func TestJourneyThroughServe(t *testing.T) {
	s := startServe(t, "--fail-on-violation", "--option", "device_interval=1s")
	cs := startPoppyMCP(t, s)
	const d = "example.com"
	tool(t, cs, "discover_company", map[string]any{"domain": d}, "speaks Poppy")
	tool(t, cs, "start_session", map[string]any{"domain": d}, "signed out")
	_, dev := tool(t, cs, "sign_in_device", map[string]any{"domain": d, "scopes": []string{"poppy:read", "poppy:write"}}, "user_code")
	approveDevice(t, s, dev["user_code"].(string))
	tool(t, cs, "sign_in_status", map[string]any{"domain": d, "wait_seconds": 20}, "complete")

	_, conv := tool(t, cs, "send_message", map[string]any{"domain": d, "text": "Can I talk to a person?", "wait_seconds": 5}, "conversation_id")
	id := conv["conversation_id"].(string)
	if status := s.admin(t, "POST", "/admin/runs/default/conversations/"+id+"/person", map[string]string{"say": "Hi, I'm Ana from the shop."}, nil); status != 200 {
		t.Fatalf("the person joining: %d", status)
	}
	tool(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 10}, "Ana from the shop")

	tool(t, cs, "call_api", map[string]any{"domain": d, "operation": "listOrders"}, "Stormline")
	tool(t, cs, "example_com_mcp_order_status", map[string]any{"order_id": "ord_1042"}, "ord_1042")
	_, site := tool(t, cs, "open_website", map[string]any{"domain": d, "url": "/orders"}, "join_url")
	if page := joinAsBrowser(t, s, site["join_url"].(string)); !strings.Contains(page, `data-signed-in="true"`) || !strings.Contains(page, "ord_1042") {
		t.Errorf("the website after joining:\n%s", page)
	}
	tool(t, cs, "sign_out", map[string]any{"domain": d}, "revoked")

	var sessions struct {
		Sessions []sessionWire `json:"sessions"`
	}
	s.admin(t, "GET", "/admin/runs/default/sessions", nil, &sessions)
	for _, sess := range sessions.Sessions {
		if sess.SignedIn {
			t.Errorf("Session %s still signed in after sign_out", sess.ID)
		}
	}
	if v := s.violations(t, "default"); len(v) != 0 {
		t.Errorf("violations: %+v", v)
	}
	if code := s.stop(t); code != exitOK {
		t.Errorf("exit %d; stderr %s", code, s.stderr.String())
	}
}

// approveDevice finds the pending sign-in of userCode through the admin
// API and approves it for acct_dana, as the person at the Company does.
func approveDevice(t *testing.T, s *served, userCode string) {
	t.Helper()
	var devs struct {
		Devices []struct {
			UserCode string `json:"user_code"`
			Status   string `json:"status"`
		} `json:"devices"`
	}
	s.admin(t, "GET", "/admin/runs/default/devices", nil, &devs)
	if len(devs.Devices) != 1 || devs.Devices[0].UserCode != userCode || devs.Devices[0].Status != "pending" {
		t.Fatalf("device sign-ins %+v, want %s pending", devs.Devices, userCode)
	}
	path := "/admin/runs/default/devices/" + url.PathEscape(userCode) + "/approve"
	if status := s.admin(t, "POST", path, map[string]string{"account": "acct_dana"}, nil); status != 200 {
		t.Fatalf("approving: %d", status)
	}
}

var (
	joinForm      = regexp.MustCompile(`<form id="join" method="post" action="([^"]+)"`)
	joinAssertion = regexp.MustCompile(`<input type="hidden" name="assertion" value="([^"]+)">`)
)

// joinAsBrowser is the agent's browser: it opens poppy-mcp's join page,
// posts its form to the Company with a cookie jar, follows the redirect,
// and returns the page it lands on.
func joinAsBrowser(t *testing.T, s *served, joinURL string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	company := curlLike(t, s.in)
	browser := &http.Client{Jar: jar, Transport: &hostRouter{local: http.DefaultTransport, company: company.Transport}}
	resp, err := browser.Get(joinURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	action, assertion := joinForm.FindSubmatch(page), joinAssertion.FindSubmatch(page)
	if action == nil || assertion == nil {
		t.Fatalf("the join page has no form: %s", page)
	}
	resp, err = browser.PostForm(string(action[1]), url.Values{"assertion": {string(assertion[1])}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// hostRouter sends loopback URLs (poppy-mcp's pages) as they are and every
// other to the Company's listener.
type hostRouter struct{ local, company http.RoundTripper }

func (h *hostRouter) RoundTrip(r *http.Request) (*http.Response, error) {
	if ip := net.ParseIP(r.URL.Hostname()); ip != nil && ip.IsLoopback() {
		return h.local.RoundTrip(r)
	}
	return h.company.RoundTrip(r)
}
