package tools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

func TestStartSession(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, nil)
			cs := h.connect(t, rev)
			res, got := call(t, cs, "start_session", map[string]any{"domain": "example.com"})
			id, _ := got["session_id"].(string)
			if res.IsError || !strings.HasPrefix(id, "ses_") || got["signed_in"] != false || got["expires_at"] == "" {
				t.Fatalf("start_session = %v (isError %v)", got, res.IsError)
			}
			_, again := call(t, cs, "start_session", map[string]any{"domain": "www.example.com"})
			if again["session_id"] != id {
				t.Errorf("a second call started another Session: %v then %v", id, again["session_id"])
			}
			_, fresh := call(t, cs, "start_session", map[string]any{"domain": "example.com", "new": true})
			if fresh["session_id"] == id {
				t.Errorf("new=true kept Session %v", id)
			}
			if n := len(h.company.Sessions()); n != 2 { // the first, then the one new=true asked for
				t.Errorf("the Company holds %d Sessions, want 2", n)
			}
			scanForSecrets(t, h, res, fresh)
		})
	}
}

// TestStartSessionResumes: a restarted poppy-mcp (same store) keeps the
// Session it had, renewing it with its session_id (Poppy 0.1 §4.2).
func TestStartSessionResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, first := call(t, h.connect(t, revisions[0]), "start_session", map[string]any{"domain": "example.com"})
	h.tools.Close() // as the stopped process's end gives its Sessions back
	restarted := tools.New(discovery.New(&http.Client{Transport: cache.New(h.company.Transport(), nil)}, nil), &tools.Options{
		Agent: h.agent, Store: h.store, Pages: h.pages,
	})
	hs := httptest.NewServer(restarted.HTTPHandler())
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last-in first-out)
	h2 := *h
	h2.url = hs.URL + "/mcp"
	_, second := call(t, h2.connect(t, revisions[1]), "start_session", map[string]any{"domain": "example.com"})
	if second["session_id"] != first["session_id"] {
		t.Fatalf("after a restart: Session %v, want %v resumed", second["session_id"], first["session_id"])
	}
	if n := len(h.company.Sessions()); n != 1 {
		t.Errorf("the Company has %d Sessions, want 1", n)
	}
}

// TestStartSessionEnded: a Session the Company ended is replaced by a new one.
func TestStartSessionEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[0])
	_, first := call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	h.company.EndSession(first["session_id"].(string))
	restarted := tools.New(discovery.New(h.company.Client(), nil), &tools.Options{Agent: h.agent, Store: h.store})
	hs := httptest.NewServer(restarted.HTTPHandler())
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last-in first-out)
	h2 := *h
	h2.url = hs.URL + "/mcp"
	res, second := call(t, h2.connect(t, revisions[0]), "start_session", map[string]any{"domain": "example.com"})
	if res.IsError || second["session_id"] == first["session_id"] {
		t.Fatalf("ended Session not replaced: %v", second)
	}
}

func TestStartSessionWithoutIdentity(t *testing.T) {
	t.Parallel()
	company := poppytest.NewServer(t, nil)
	ts := tools.New(discovery.New(company.Client(), nil), nil)
	hs := httptest.NewServer(ts.HTTPHandler())
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last-in first-out)
	h := &harness{company: company, url: hs.URL + "/mcp"}
	res, got := call(t, h.connect(t, revisions[0]), "start_session", map[string]any{"domain": "example.com"})
	text := res.Content[0].(*sdk.TextContent).Text
	if !res.IsError || got["error"] != "no_identity" || !strings.Contains(text, "poppy-mcp init") {
		t.Fatalf("without identity: %v %q", got, text)
	}
}

// scanForSecrets fails when any secret the Company issued or received (tokens,
// assertions, proofs) appears in what the client got or in the logs.
func scanForSecrets(t *testing.T, h *harness, results ...any) {
	t.Helper()
	var seen strings.Builder
	for _, r := range results {
		b, _ := json.Marshal(r)
		seen.Write(b)
	}
	seen.WriteString(h.logs.String())
	secrets := h.company.IssuedSecrets()
	if len(secrets) == 0 {
		t.Fatal("the Company recorded no secrets: the scan would prove nothing")
	}
	for _, s := range secrets {
		if len(s) >= 8 && strings.Contains(seen.String(), s) {
			t.Errorf("a secret issued by the Company reached the client or the logs: %.12s…", s)
		}
	}
}

var _ = context.Background

// TestStartSessionNarrows: a signed-in Session can be narrowed for a task and
// widened back, never beyond what the sign-in granted (Poppy 0.1 §4.8).
func TestStartSessionNarrows(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[1])
	res, got := call(t, cs, "start_session", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	if !res.IsError || got["error"] != "not_signed_in" {
		t.Fatalf("narrowing signed out: %v", got)
	}
	signIn(t, h, cs, "poppy:read", "poppy:write")
	res, got = call(t, cs, "start_session", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	if res.IsError || got["signed_in"] != true || strings.Join(strs(got["scopes"]), " ") != "poppy:read" {
		t.Fatalf("narrowed: %v (isError %v)", got, res.IsError)
	}
	res, _ = call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "createReturn",
		"arguments": map[string]any{"order_id": "ord_1042", "reason": "too small"}})
	if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.Contains(text, "poppy:write") {
		t.Errorf("a write with a read-only Session: %q", text)
	}
	res, got = call(t, cs, "start_session", map[string]any{"domain": "example.com", "scopes": []string{"addresses"}})
	if !res.IsError || got["error"] != "scope_not_granted" {
		t.Errorf("widening beyond the sign-in: %v", got)
	}
	_, got = call(t, cs, "start_session", map[string]any{"domain": "example.com", "scopes": []string{}})
	if strings.Join(strs(got["scopes"]), " ") != "poppy:read poppy:write" {
		t.Errorf("widened back: %v", got)
	}
}

// TestStartSessionNarrowRace: narrowing while another call starts a new
// Session touches the companyState only under its lock (run with -race).
func TestStartSessionNarrowRace(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	signIn(t, h, cs, "poppy:read", "poppy:write")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "start_session", Arguments: map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}}})
		}()
		go func() {
			defer wg.Done()
			cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "start_session", Arguments: map[string]any{"domain": "example.com", "new": true}})
		}()
	}
	wg.Wait()
}
