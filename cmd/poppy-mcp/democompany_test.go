package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoSession is `serve --demo` over stdio with the go-sdk client.
type demoSession struct {
	t      *testing.T
	cs     *sdk.ClientSession
	stderr *testlog.Buffer
}

func startDemoServe(t *testing.T) *demoSession {
	t.Helper()
	return startDemoServeWith(t, sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil), nil)
}

// startDemoServeWith is startDemoServe with the client c and session options.
func startDemoServeWith(t *testing.T, c *sdk.Client, opts *sdk.ClientSessionOptions) *demoSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.Command(binary, "serve", "--demo", "--state-dir", t.TempDir())
	stderr := &testlog.Buffer{}
	cmd.Stderr = stderr
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, opts)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return &demoSession{t: t, cs: cs, stderr: stderr}
}

// call calls a tool and returns its text and structured content.
func (d *demoSession) call(name string, args map[string]any) (string, map[string]any) {
	d.t.Helper()
	res, err := d.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		d.t.Fatalf("%s: %v %+v\nstderr: %s", name, err, res, d.stderr.String())
	}
	var got map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &got)
	return res.Content[0].(*sdk.TextContent).Text, got
}

// TestServeDemoHandoff: under `serve --demo` a person of the demo Company
// joins a handoff by themself and writes, as in `poppy-mcp demo`. Before,
// the handoff stayed queued forever.
func TestServeDemoHandoff(t *testing.T) {
	t.Parallel()
	d := startDemoServe(t)
	_, res := d.call("send_message", map[string]any{"domain": demoDomain, "text": "Hello", "wait_seconds": 10})
	conv, _ := res["conversation_id"].(string)
	d.call("request_human", map[string]any{"conversation_id": conv})
	var texts []string
	for range 4 {
		text, res := d.call("read_events", map[string]any{"conversation_id": conv, "wait_seconds": 10})
		texts = append(texts, text)
		if res["responder"] == "human" && strings.Contains(text, "company_person") {
			return
		}
	}
	t.Errorf("no person joined the handoff:\n%s", strings.Join(texts, "\n"))
}

var (
	sentToRE = regexp.MustCompile(`sent you a one-time code: the demo inbox, (http://127\.0\.0\.1:\d+/demo/inbox)`)
	codeRE   = regexp.MustCompile(`class="code">(\d{6})<`)
)

// TestServeDemoMediatedCode: under `serve --demo` the account whose
// sign-in needs a one-time code (sam@example.com) can finish: the code page
// of poppy-mcp's sign-in page names the demo Company's inbox, a loopback
// page the user's browser opens, which shows the code; typed back, it signs
// in. The code never reaches the model nor the log. Before, the code was
// random and shown nowhere.
func TestServeDemoMediatedCode(t *testing.T) {
	t.Parallel()
	d := startDemoServe(t)
	_, res := d.call("sign_in_mediated", map[string]any{"domain": demoDomain, "scopes": []string{"poppy:read"}})
	page, _ := res["sign_in_url"].(string)
	if page == "" {
		t.Fatalf("sign_in_mediated gave no sign_in_url: %v", res)
	}
	codePage := postForm(t, page, url.Values{"email": {"sam@example.com"}, "password": {"sam-secret-42"}})
	m := sentToRE.FindStringSubmatch(html.UnescapeString(codePage))
	if m == nil {
		t.Fatalf("the code page does not say where the code is:\n%s", codePage)
	}
	inbox := get(t, m[1])
	c := codeRE.FindStringSubmatch(inbox)
	if c == nil {
		t.Fatalf("the inbox shows no code:\n%s", inbox)
	}
	if done := postForm(t, page, url.Values{"code": {c[1]}}); !strings.Contains(done, "You are signed in") {
		t.Fatalf("after the code from the inbox:\n%s", done)
	}
	text, st := d.call("sign_in_status", map[string]any{"domain": demoDomain, "wait_seconds": 5})
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Errorf("sign_in_status: %s", text)
	}
	if strings.Contains(text, c[1]) || strings.Contains(d.stderr.String(), c[1]) {
		t.Error("the one-time code reached the model or the log")
	}
	if !strings.Contains(d.stderr.String(), m[1]) {
		t.Errorf("the log does not say where the inbox is:\n%s", d.stderr.String())
	}
	// The inbox answers only under its own address, not a name rebound to it.
	req, _ := http.NewRequest(http.MethodGet, m[1], nil)
	req.Host = "attacker.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("the inbox under another Host: %v %v", resp, err)
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// postForm posts form to u as a browser on u's page does.
func postForm(t *testing.T, u string, form url.Values) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	pu, _ := url.Parse(u)
	req.Header.Set("Origin", pu.Scheme+"://"+pu.Host)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
