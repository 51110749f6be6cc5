package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// wire is everything one MCP client received from serve, byte for byte:
// every response body, SSE streams (results, progress, logs, list_changed)
// included. It is safe for concurrent use.
type wire = testlog.Buffer

// recording sends the person's token on every request and records every
// response body into w as the client reads it.
type recording struct {
	token string
	w     *wire
}

func (r recording) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, r.w), resp.Body}
	}
	return resp, err
}

// hostedPerson is one person of a hosted deployment with their MCP client.
type hostedPerson struct {
	name, account string
	cs            *sdk.ClientSession
	wire          *wire
	listChanged   atomic.Int32
	userCode      string
	conversation  string
}

// connectPerson connects the go-sdk client as name (the sub of the access
// token the issuer gives it) to replica at revision rev, recording its wire.
func (h *hostedDeployment) connectPerson(t *testing.T, replica int, name, account, rev string) *hostedPerson {
	t.Helper()
	p := &hostedPerson{name: name, account: account, wire: &wire{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { p.listChanged.Add(1) },
	})
	hc := &http.Client{Transport: recording{h.idp.AccessToken(t, "claude", name), p.wire}}
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.replicas[replica].mcpURL, HTTPClient: hc, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("%s connects at %s: %v", name, rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	if rev == "2025-11-25" { // log notifications: per session at 2025-11-25
		if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
	}
	p.cs = cs
	return p
}

// call calls a tool as the person and returns its structured content and
// whether it is an error result.
func (p *hostedPerson) call(t *testing.T, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	params.SetProgressToken(p.name + "-" + name) // progress, where a call waits, is recorded too
	res, err := p.cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("%s calls %s: %v", p.name, name, err)
	}
	m, _ := res.StructuredContent.(map[string]any)
	return m, res.IsError
}

// tools lists the person's tools.
func (p *hostedPerson) tools(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var names []string
	for tool, err := range p.cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// signIn signs the person in to example.com by device sign-in, approved
// at the Company as their account.
func (p *hostedPerson) signIn(t *testing.T, h *hostedDeployment) {
	t.Helper()
	got, _ := p.call(t, "sign_in_device", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	p.userCode, _ = got["user_code"].(string)
	if p.userCode == "" {
		t.Fatalf("%s: sign_in_device = %v", p.name, got)
	}
	if err := h.srv.ApproveDevice(p.userCode, p.account, "poppy:read"); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		st, _ := p.call(t, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 10})
		if st["status"] == "complete" {
			return
		}
	}
	t.Fatalf("%s: the device sign-in did not complete\nserve's log:\n%s", p.name, h.logged())
}

// TestHostedPeopleAtOneCompany: two people of one hosted poppy-mcp (dana
// at MCP 2025-11-25, sam at 2026-07-28, each with their own access token
// from the issuer) sign in to the same Company with different accounts
// (device sign-in approved as acct_dana and acct_sam), talk to its Company
// Agent, call its API and open its website; sam also uses a second Company
// dana never does. The Company sees two Users; each person's client
// received nothing of the other's (conversation IDs, account data, user
// codes, the other Company's tools), neither result nor notification;
// sam cannot read dana's conversation or see it listed; each person's log
// lines carry their pseudonymous ID.
//
// On main before people were kept apart, the second sign-in replaced the
// first at the one User the deployment had, and sam's client listed and
// read dana's conversation: this test fails there.
func TestHostedPeopleAtOneCompany(t *testing.T) {
	t.Parallel()
	other := poppytest.NewServer(t, &poppytest.Options{Domain: "outdoor.example"})
	h := startHostedWith(t, &deploymentOptions{Others: []*poppytest.Server{other}})
	dana := h.connectPerson(t, 0, "dana", "acct_dana", "2025-11-25")
	sam := h.connectPerson(t, 0, "sam", "acct_sam", "2026-07-28")
	peopleJourney(t, h, dana, sam)
	checkLogIDs(t, h, dana, sam)
}

// peopleJourney: dana and sam sign in to example.com with their accounts,
// talk, call its API and open its website; sam also starts a Session at
// outdoor.example. Then the checks: the Company sees two Users; neither
// client received anything of the other's; sam cannot read dana's
// conversation or see it listed. From then on only dana's wire is clean.
func peopleJourney(t *testing.T, h *hostedDeployment, dana, sam *hostedPerson) {
	t.Helper()
	for _, p := range []*hostedPerson{dana, sam} {
		p.signIn(t, h)
		got, isErr := p.call(t, "send_message", map[string]any{"domain": "example.com", "text": "Hello from " + p.name, "wait_seconds": 0})
		p.conversation, _ = got["conversation_id"].(string)
		if isErr || p.conversation == "" {
			t.Fatalf("%s: send_message = %v", p.name, got)
		}
		if got, isErr := p.call(t, "call_api", map[string]any{"domain": "example.com", "operation": "listOrders"}); isErr {
			t.Fatalf("%s: call_api = %v", p.name, got)
		}
		if got, isErr := p.call(t, "open_website", map[string]any{"domain": "example.com"}); isErr {
			t.Fatalf("%s: open_website = %v", p.name, got)
		}
	}
	for _, p := range []*hostedPerson{dana, sam} { // example.com's tools were announced to each, at each revision
		waitFor(t, 30*time.Second, p.name+"'s notifications/tools/list_changed", func() bool { return p.listChanged.Load() > 0 })
	}
	danaChanges, samChanges := dana.listChanged.Load(), sam.listChanged.Load()
	if got, isErr := sam.call(t, "start_session", map[string]any{"domain": "outdoor.example"}); isErr {
		t.Fatalf("sam: start_session at outdoor.example = %v", got)
	}
	waitFor(t, 30*time.Second, "sam's list_changed for outdoor.example", func() bool { return sam.listChanged.Load() > samChanges })
	dana.call(t, "sign_in_status", map[string]any{"domain": "example.com"}) // a round trip, for a stray notification to arrive
	if got := dana.listChanged.Load(); got != danaChanges {
		t.Errorf("dana got %d notifications/tools/list_changed when sam's tools changed", got-danaChanges)
	}
	checkCompanyUsers(t, h.srv)
	checkNotShared(t, dana, sam)

	// sam's client now names dana's conversation itself: only dana's wire
	// is scanned from here on.
	checkNotReadable(t, sam, dana)
	for _, s := range []string{sam.conversation, sam.userCode, "acct_sam", "Rain hat", "outdoor_example"} {
		if strings.Contains(dana.wire.String(), s) {
			t.Errorf("dana's client received %q, which is sam's", s)
		}
	}
}

// checkNotReadable: p cannot read the other person's conversation, and
// lists their own but not the other's.
func checkNotReadable(t *testing.T, p, other *hostedPerson) {
	t.Helper()
	if got, isErr := p.call(t, "read_events", map[string]any{"domain": "example.com", "conversation_id": other.conversation}); !isErr ||
		got["error"] != "unknown_conversation" {
		t.Errorf("%s reads %s's conversation: %v (error %v), want unknown_conversation", p.name, other.name, got, isErr)
	}
	listed, _ := p.call(t, "list_conversations", map[string]any{})
	if s := fmt.Sprint(listed); strings.Contains(s, other.conversation) || !strings.Contains(s, p.conversation) {
		t.Errorf("%s's list_conversations: %v", p.name, listed)
	}
}

// checkCompanyUsers: the Company sees each person as a User of their own,
// signed in to their own account.
func checkCompanyUsers(t *testing.T, srv *poppytest.Server) {
	t.Helper()
	users := map[string]string{} // account -> User ID
	for _, s := range srv.SignedInSessions() {
		users[s.Account] = s.UserID
	}
	if users["acct_dana"] == "" || users["acct_sam"] == "" || users["acct_dana"] == users["acct_sam"] {
		t.Errorf("the Company's signed-in Users by account: %v, want two different User IDs", users)
	}
}

// checkNotShared: what belongs to one person never reached the other's
// client; and each person's client has its own Companies' tools.
func checkNotShared(t *testing.T, dana, sam *hostedPerson) {
	t.Helper()
	theirs := func(p *hostedPerson, other string) []string {
		return []string{p.conversation, p.userCode, p.account, other}
	}
	for p, own := range map[*hostedPerson]string{dana: "Stormline jacket, size M", sam: "Rain hat"} {
		if !strings.Contains(p.wire.String(), own) || !strings.Contains(p.wire.String(), p.conversation) {
			t.Fatalf("%s's client did not receive their own orders and conversation: the scan below would prove nothing", p.name)
		}
	}
	if !strings.Contains(dana.wire.String(), "notifications/message") {
		t.Fatal("dana's client (logging/setLevel debug) received no log notification: the scan below would not cover them")
	}
	danaTools, samTools := dana.tools(t), sam.tools(t)
	for _, c := range []struct {
		who      *hostedPerson
		tools    []string
		notTheir []string
	}{
		{dana, danaTools, append(theirs(sam, "Rain hat"), "outdoor_example")},
		{sam, samTools, theirs(dana, "Stormline jacket, size M")},
	} {
		got := c.who.wire.String()
		for _, s := range c.notTheir {
			if s != "" && strings.Contains(got, s) {
				t.Errorf("%s's client received %q, which is the other person's", c.who.name, s)
			}
		}
		if !slices.ContainsFunc(c.tools, func(n string) bool { return strings.HasPrefix(n, "example_com_") }) {
			t.Errorf("%s's tools have none of example.com's: %v", c.who.name, c.tools)
		}
	}
	if slices.ContainsFunc(danaTools, func(n string) bool { return strings.HasPrefix(n, "outdoor_example_") }) {
		t.Errorf("dana lists outdoor.example's tools, which only sam has a Session with: %v", danaTools)
	}
	if !slices.ContainsFunc(samTools, func(n string) bool { return strings.HasPrefix(n, "outdoor_example_") }) {
		t.Errorf("sam's tools have none of outdoor.example's: %v", samTools)
	}
}

// checkLogIDs: the lines serve logged of each person's work carry their
// pseudonymous ID, keyed by the deployment's secret, those of a tool call
// and those of its background work (the device sign-in's polling, which
// logs "signed in") alike; no line carries the unkeyed hash of the
// person's (issuer, sub) (their local user key, or its first twelve
// characters, the ID logs used to carry), which anyone with a list of
// people could compute.
func checkLogIDs(t *testing.T, h *hostedDeployment, people ...*hostedPerson) {
	t.Helper()
	logged, ids := h.logged(), h.logIDs(t)
	lines := strings.Split(logged, "\n")
	for _, p := range people {
		u := mcpauth.User{Issuer: h.idp.Issuer(), Subject: p.name}
		id := ids.Of(u)
		for _, msg := range []string{`msg="device sign-in started"`, `msg="signed in"`} {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, msg) && strings.Contains(l, "user="+id) }) {
				t.Errorf("no %s line carries %s's pseudonymous ID %s", msg, p.name, id)
			}
		}
		if unkeyed := u.Key()[:12]; strings.Contains(logged, unkeyed) {
			t.Errorf("the logs carry %s's unkeyed hash %s", p.name, unkeyed)
		}
	}
}
