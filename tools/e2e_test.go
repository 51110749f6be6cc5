package tools_test

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// wireRecorder keeps every byte the MCP client received over HTTP (JSON
// responses and SSE streams: results, progress, logs, list_changed).
type wireRecorder struct {
	next http.RoundTripper // nil: http.DefaultTransport
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (w *wireRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := cmp.Or(w.next, http.DefaultTransport).RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &teeBody{rc: resp.Body, w: w}
	return resp, nil
}

func (w *wireRecorder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type teeBody struct {
	rc io.ReadCloser
	w  *wireRecorder
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	t.w.mu.Lock()
	t.w.buf.Write(p[:n])
	t.w.mu.Unlock()
	return n, err
}

func (t *teeBody) Close() error { return t.rc.Close() }

// TestEndToEnd is the whole journey through a real MCP client at both
// revisions: discovery, a Session, a sign-in, a conversation that needs the
// account, an API call, a relayed MCP tool, the website join, and sign-out.
// Then every byte the client received and every log line is scanned for
// every secret the Company issued or was given. It runs three times: against
// the default Company with Device Sign-In; against a Company as strict as the
// spec lets it be, with every strictness knob on at once (strictCompany);
// and against that Company with a second domain under its issuer, where the
// sign-in, the API, the relayed tool, the website and the sign-out go
// through the second domain in the one Session (this run fails on the code
// that kept one domain's documents per issuer).
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	runs := []struct {
		name string
		opts func() *poppytest.Options
		jo   journeyOptions
	}{
		{"default", func() *poppytest.Options {
			return &poppytest.Options{AutoApprove: &poppytest.AutoApproval{Account: "acct_dana", After: time.Second},
				DeviceInterval: time.Second}
		}, journeyOptions{}},
		{"strict", strictCompany, journeyOptions{mediated: true}},
		{"strict, two domains", func() *poppytest.Options {
			o := strictCompany()
			o.OtherDomains = []string{uk}
			return o
		}, journeyOptions{mediated: true, second: uk}},
	}
	for _, run := range runs {
		for _, rev := range revisions {
			t.Run(run.name+"/"+rev, func(t *testing.T) {
				t.Parallel()
				inBubble(t, func(t *testing.T, n *memnet.Network) {
					h := newHarnessWith(t, run.opts(), &harnessOptions{Net: n})
					t.Cleanup(h.tools.Close)
					if run.jo.mediated {
						rateLimitDocuments(h)
					}
					wire := &wireRecorder{next: h.local}
					cs := h.connectVia(t, rev, &http.Client{Transport: wire})
					journey(t, h, cs, run.jo)
					scanWire(t, h, wire)
					if run.jo.mediated {
						wantStrictness(t, h)
					}
				})
			})
		}
	}
}

// strictCompany is poppytest with every strictness knob on at once: each
// is something the spec allows a Company, and an agent that leans on a
// lenient reading fails against it. DPoP nonces on every host, refusing a
// superseded Session Token once its replacement was used, and taking only
// {} for handoff and close are poppytest's defaults.
func strictCompany() *poppytest.Options {
	accounts := poppytest.DefaultAccounts()
	accounts[0].RequiresCode, accounts[0].SentTo = true, "Text to the phone number ending in 71" // acct_dana
	return &poppytest.Options{
		Accounts:     accounts,
		ReplayEvents: 3,      // §7.5: a read may return events again
		AgentRole:    "user", // §7.5 defines only "company": the agent's own messages are known by their IDs
		// §7.5: has_more pages, read again at once.
		EventPageSize: 2,
		// §7.6: "The Company MAY close a stream at any time".
		StreamLifetime: 2 * time.Second,
		// §4.8: each refresh gives a new Account Token; the old one is refused.
		RotateRefreshTokens: true,
		// §4.7: answers are read by their status, whatever the status line.
		MediatedHTTPStatus: map[string]int{"invalid_credentials": 401, "code_required": 202, "complete": 201},
		// Discovery and OpenAPI documents from a file host: JSON as text/plain.
		DocumentContentType: "text/plain; charset=utf-8",
	}
}

// rateLimitDocuments makes the first fetch of each of the Company's public
// documents answer 429 with a Retry-After of one second (Poppy 0.1 §4.3:
// "any of its endpoints"): poppy-mcp waits it out within the call, and
// poppytest reports any request sent before it passes.
func rateLimitDocuments(h *harness) {
	c := h.company
	c.RateLimit("auth."+c.Domain(), "/.well-known/oauth-authorization-server", 1, time.Second)
	for _, d := range c.Domains() {
		c.RateLimit(d, "/.well-known/poppy.json", 1, time.Second)
		c.RateLimit("api."+d, "/openapi.json", 1, time.Second)
		c.RateLimit("mcp."+d, "/.well-known/oauth-protected-resource/mcp", 1, time.Second)
	}
}

// wantStrictness checks that the strict Company's knobs were met, not
// skipped: every document's 429, and a Mediated Sign-In answer under another
// status line.
func wantStrictness(t *testing.T, h *harness) {
	t.Helper()
	if n, want := h.company.Served("rate_limited"), 1+3*len(h.company.Domains()); n != want {
		t.Errorf("%d documents answered 429, want %d: the journey did not meet them all", n, want)
	}
	if h.company.Served("invalid_credentials") == 0 {
		t.Error("no wrong credentials were answered: the 401 went untried")
	}
}

// scanWire checks that no secret the Company issued or was given reached
// the client or the logs.
func scanWire(t *testing.T, h *harness, wire *wireRecorder) {
	t.Helper()
	secrets := h.company.IssuedSecrets()
	if len(secrets) < 5 {
		t.Fatalf("the Company recorded only %d secrets: the scan would prove little", len(secrets))
	}
	seen := wire.String() + h.logs.String()
	if !strings.Contains(seen, "Stormline") {
		t.Fatal("the recording misses the results: the scan would prove nothing")
	}
	for _, s := range secrets {
		if len(s) >= 8 && strings.Contains(seen, s) {
			t.Errorf("a secret the Company issued reached the client or the logs: %.10s…", s)
		}
	}
}

// journeyOptions vary the journey. The zero value is the plain journey: one
// domain, Device Sign-In approved by the Company.
type journeyOptions struct {
	// second is the domain the sign-in, the API call, the relayed tool, the
	// website and the sign-out go through; the conversation stays on
	// example.com. "": example.com.
	second string
	// mediated signs in with Mediated Sign-In on the user's page: a wrong
	// password, then the right one, then a one-time code (a wrong one first).
	mediated bool
}

// journey runs the scenario's steps and checks each one's outcome.
func journey(t *testing.T, h *harness, cs *sdk.ClientSession, jo journeyOptions) {
	t.Helper()
	const d = "example.com"
	d2 := cmp.Or(jo.second, d)
	step := func(name string, args map[string]any, want string) map[string]any {
		t.Helper()
		res, got := call(t, cs, name, args)
		text := textOf(res) // the summary, then the structured content as JSON
		if res.IsError || !strings.Contains(text, want) {
			t.Fatalf("%s: isError=%v, text %q lacks %q", name, res.IsError, text, want)
		}
		return got
	}
	step("discover_company", map[string]any{"domain": d}, "speaks Poppy")
	step("discover_company", map[string]any{"domain": d2}, "speaks Poppy")
	step("start_session", map[string]any{"domain": d}, "signed out")
	conv := step("send_message", map[string]any{"domain": d, "text": "What is the status of order 1042?", "wait_seconds": 10}, "sign_in_device")
	id := conv["conversation_id"].(string)
	if jo.mediated {
		signInMediated(t, h, cs, d2)
	} else {
		step("sign_in_device", map[string]any{"domain": d2, "scopes": []string{"poppy:read", "poppy:write"}}, "sign_in_status")
	}
	step("sign_in_status", map[string]any{"domain": d, "wait_seconds": 20}, "complete")
	step("send_message", map[string]any{"domain": d, "conversation_id": id, "text": "Signed in: the status of order 1042, please.", "wait_seconds": 10}, "delivered")
	step("call_api", map[string]any{"domain": d2, "operation": "listOrders"}, "Stormline")
	step(tools.DomainLabel(d2)+"_mcp_order_status", map[string]any{"order_id": "ord_1042"}, "")
	site := step("open_website", map[string]any{"domain": d2, "url": "/orders"}, "join_url")
	if resp := postJoin(t, h, openJoin(t, h, site["join_url"].(string))); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "https://"+d2+"/orders" {
		t.Fatalf("the join of %s: %d to %q", d2, resp.StatusCode, resp.Header.Get("Location"))
	}
	step("close_conversation", map[string]any{"conversation_id": id}, "closed")
	step("sign_out", map[string]any{"domain": d2}, "revoked")
	if n := len(h.company.SignedInSessions()); n != 0 {
		t.Errorf("%d Sessions still signed in after sign_out", n)
	}
	if n := len(h.company.Sessions()); n != 1 {
		t.Errorf("the Company has %d Sessions, want the one (Poppy 0.1 §3.2: one Company)", n)
	}
}

// signInMediated signs acct_dana in through the mediated page of domain,
// as the user would: a wrong password first, then a wrong one-time code.
func signInMediated(t *testing.T, h *harness, cs *sdk.ClientSession, domain string) {
	t.Helper()
	res, got := call(t, cs, "sign_in_mediated", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
	u, _ := got["sign_in_url"].(string)
	if res.IsError || u == "" {
		t.Fatalf("sign_in_mediated: %v", got)
	}
	b := newUserBrowser(t, h.local)
	if page := b.fillCredentials(u, "dana@example.com", "wrong"); !strings.Contains(page, "not accepted") {
		t.Fatalf("after a wrong password: %s", page)
	}
	page := b.fillCredentials(u, "dana@example.com", "correct-horse-battery")
	if page = codeStep(t, b, h.company, u, page); !strings.Contains(page, "signed in") {
		t.Fatalf("after the code: %s", page)
	}
	// Two sign-ins, and a retry with the DPoP nonce of a host not asked before.
	if n := h.company.Count("auth."+domain, "/poppy/sign-in"); n < 2 {
		t.Errorf("%d credential posts to auth.%s, want 2 or more", n, domain)
	}
	if n := h.company.Count("auth.example.com", "/poppy/sign-in"); domain != "example.com" && n != 0 {
		t.Errorf("%d credential posts to auth.example.com, not %s's endpoint", n, domain)
	}
}

// connectVia is connect with the client's own HTTP client (to record the wire).
func (h *harness) connectVia(t *testing.T, revision string, hc *http.Client) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url, HTTPClient: hc, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
