package tools_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

const publicURL = "https://agent.example"

// directHarness is a harness whose poppy-mcp runs in HTTP mode at publicURL,
// publishing publicURL/oauth/callback in its redirect_uris, with the
// callback mounted on callback.
type directHarness struct {
	*harness
	callback *httptest.Server
}

func newDirectHarness(t *testing.T) *directHarness {
	t.Helper()
	h := newSignInHarness(t, nil)
	// The same key from the store, now publishing the callback.
	id, err := auth.NewIdentity(context.Background(), clientID, &auth.IdentityOptions{Store: h.store,
		ClientName: "poppy-mcp test", RedirectURIs: []string{publicURL + tools.CallbackPath}})
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	h.company.SetAgentDocuments(agentJSON, jwks)
	h.agent = auth.New(id, &auth.Options{HTTPClient: h.company.Client(), Store: h.store})
	h.tools = tools.New(tools.Deps{
		Discovery: discovery.New(&http.Client{Transport: cache.New(h.company.Transport(), nil)}, nil),
		Agent:     h.agent, Store: h.store, Pages: h.pages, PublicURL: publicURL,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(h.tools.Close)
	hs := httptest.NewServer(h.tools.HTTPHandler())
	t.Cleanup(hs.Close)
	h.url = hs.URL + "/mcp"
	mux := http.NewServeMux()
	mux.Handle(tools.CallbackPath, h.tools.CallbackHandler())
	cb := httptest.NewServer(mux)
	t.Cleanup(cb.Close)
	return &directHarness{harness: h, callback: cb}
}

// open has the user's browser open the authorization URL (the Company's
// consent page) and returns the state sent.
func (h *directHarness) open(t *testing.T, got map[string]any) string {
	t.Helper()
	u, _ := got["authorization_url"].(string)
	resp, err := h.company.Client().Get(u)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("consent page %q: %v %v", u, resp, err)
	}
	resp.Body.Close()
	pu, _ := url.Parse(u)
	return pu.Query().Get("state")
}

// back follows the Company's redirect to the callback, as the browser does,
// with edit applied to its query, and returns the page shown.
func (h *directHarness) back(t *testing.T, redirect string, edit func(url.Values)) string {
	t.Helper()
	u, err := url.Parse(redirect)
	if err != nil || "https://"+u.Host+u.Path != publicURL+tools.CallbackPath {
		t.Fatalf("redirect to %q", redirect)
	}
	q := u.Query()
	if edit != nil {
		edit(q)
	}
	resp, err := http.Get(h.callback.URL + u.Path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func startDirect(t *testing.T, cs *sdk.ClientSession) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, got := call(t, cs, "sign_in_direct", map[string]any{"domain": domain, "scopes": []string{"poppy:read", "addresses"}})
	if res.IsError || got["status"] != "pending" || got["authorization_url"] == nil {
		t.Fatalf("sign_in_direct = %v", got)
	}
	return res, got
}

func TestSignInDirect(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newDirectHarness(t)
			cs := h.connect(t, rev)
			first, got := startDirect(t, cs)
			to, err := h.company.ApproveAuthorization(h.open(t, got), "acct_dana")
			if err != nil {
				t.Fatal(err)
			}
			if page := h.back(t, to, nil); !strings.Contains(page, "You are signed in") {
				t.Fatalf("callback page: %s", page)
			}
			res, st := status(t, cs, 5)
			if st["status"] != "complete" || st["signed_in"] != true || len(strs(st["scopes"])) != 2 || h.kept(t) == "" {
				t.Fatalf("sign_in_status = %v", st)
			}
			if again := h.back(t, to, nil); !strings.Contains(again, "unknown or has finished") {
				t.Errorf("a replayed callback: %s", again)
			}
			scanForSecrets(t, h.harness, first, res)
		})
	}
}

func TestSignInDirectDeniedAndMixUp(t *testing.T) {
	for name, tc := range map[string]struct {
		deny bool
		edit func(url.Values)
		want string
	}{
		"denied":    {deny: true, want: "denied"},
		"other iss": {edit: func(q url.Values) { q.Set("iss", "https://auth.evil.example") }, want: "failed"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newDirectHarness(t)
			cs := h.connect(t, revisions[1])
			_, got := startDirect(t, cs)
			state := h.open(t, got)
			approve := func(state string) (string, error) { return h.company.ApproveAuthorization(state, "acct_dana") }
			if tc.deny {
				approve = h.company.DenyAuthorization
			}
			to, err := approve(state)
			if err != nil {
				t.Fatal(err)
			}
			h.back(t, to, tc.edit)
			res, st := status(t, cs, 5)
			if !res.IsError || st["status"] != tc.want || st["signed_in"] != false || h.kept(t) != "" {
				t.Fatalf("sign_in_status = %v", st)
			}
			for _, r := range h.company.Requests() {
				if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "grant_type=authorization_code") {
					t.Error("the code was exchanged")
				}
			}
		})
	}
}

// TestSignInDirectWithoutCallback: without --public-url the tool says to use
// Device Sign-In.
func TestSignInDirectWithoutCallback(t *testing.T) {
	h := newSignInHarness(t, nil)
	res, got := call(t, h.connect(t, revisions[0]), "sign_in_direct", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
	text := res.Content[0].(*sdk.TextContent).Text
	if !res.IsError || got["error"] != "no_callback" || !strings.Contains(text, "sign_in_device") {
		t.Fatalf("sign_in_direct = %v %q", got, text)
	}
}
