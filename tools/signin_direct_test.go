package tools_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

const (
	publicURL = "https://agent.example"
	// deploymentToken is the deployment's credential (its HTTP bearer
	// token), which a browser shows once to open pages under publicURL.
	deploymentToken = "the-deployment-bearer-token-for-tests"
)

// directHarness is a harness whose poppy-mcp runs in HTTP mode at publicURL,
// publishing publicURL/oauth/callback in its redirect_uris. poppytest serves
// agent.example (its AgentHost) from its own TLS listener, and there the
// user's pages and the callback are mounted, as `serve --public-url` mounts
// them behind a TLS proxy.
type directHarness struct {
	*harness
	user *userBrowser // the user's browser, which knows the deployment's credential
}

func newDirectHarness(t *testing.T) *directHarness {
	t.Helper()
	return newPublicHarness(t, nil)
}

// newPublicHarness is newDirectHarness with Company options.
func newPublicHarness(t *testing.T, opts *poppytest.Options) *directHarness {
	t.Helper()
	h := newSignInHarness(t, opts)
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
	pg, err := pages.New(&pages.Options{
		PublicURL: publicURL + "/pages", Gate: pages.NewCredentialGate(deploymentToken),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	h.pages = pg
	h.tools = tools.New(discovery.New(&http.Client{Transport: cache.New(h.company.Transport(), nil)}, nil), &tools.Options{
		Agent: h.agent, Store: h.store, Pages: pg, PublicURL: publicURL,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(h.tools.Close)
	hs := httptest.NewServer(h.tools.HTTPHandler())
	t.Cleanup(hs.Close)
	h.url = hs.URL + "/mcp"
	h.company.Handle(h.company.AgentHost(), "/pages/", pg.Handler())
	h.company.Handle(h.company.AgentHost(), "GET "+tools.CallbackPath, pg.CheckHost(h.tools.CallbackHandler()))
	dh := &directHarness{harness: h}
	dh.user = dh.browser(t, deploymentToken)
	return dh
}

// browser is a browser that reaches agent.example and the Company's hosts
// and keeps cookies; credential is what it answers when a page asks for the
// deployment's ("" for someone who does not know it).
func (h *directHarness) browser(t *testing.T, credential string) *userBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &userBrowser{t: t, c: &http.Client{Transport: h.company.Transport(), Jar: jar}, credential: credential}
}

// open has the user's browser open sign_in_url: it shows the deployment's
// credential once, and the start page sends it on to the Company's consent
// page. It returns the state of the authorization request, which only the
// browser saw.
func (h *directHarness) open(t *testing.T, got map[string]any) string {
	t.Helper()
	u, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(u, publicURL+"/pages/p/") {
		t.Fatalf("sign_in_url %q is not a page under the public URL", u)
	}
	page := h.user.get(u)
	if h.user.last.Host != "auth.example.com" || !strings.Contains(page, "Sign in to") {
		t.Fatalf("the start page led to %v: %s", h.user.last, page)
	}
	return h.user.last.Query().Get("state")
}

// back follows the Company's redirect to the callback in the user's
// browser, with edit applied to its query, and returns the page shown.
func (h *directHarness) back(t *testing.T, redirect string, edit func(url.Values)) string {
	t.Helper()
	return h.backIn(t, h.user, redirect, edit)
}

// backIn is back in browser b.
func (h *directHarness) backIn(t *testing.T, b *userBrowser, redirect string, edit func(url.Values)) string {
	t.Helper()
	u, err := url.Parse(redirect)
	if err != nil || "https://"+u.Host+u.Path != publicURL+tools.CallbackPath {
		t.Fatalf("redirect to %q", redirect)
	}
	if edit != nil {
		q := u.Query()
		edit(q)
		u.RawQuery = q.Encode()
	}
	return b.get(u.String())
}

// codeExchanges counts the authorization_code grants the Company received.
func (h *directHarness) codeExchanges() int {
	n := 0
	for _, r := range h.company.Requests() {
		if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "grant_type=authorization_code") {
			n++
		}
	}
	return n
}

func startDirect(t *testing.T, cs *sdk.ClientSession) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, got := call(t, cs, "sign_in_direct", map[string]any{"domain": domain, "scopes": []string{"poppy:read", "addresses"}})
	if res.IsError || got["status"] != "pending" || got["sign_in_url"] == nil {
		t.Fatalf("sign_in_direct = %v", got)
	}
	return res, got
}

func TestSignInDirect(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newDirectHarness(t)
			cs := h.connect(t, rev)
			first, got := startDirect(t, cs)
			// The model sees poppy-mcp's page, never the authorization URL
			// with its state and code_challenge.
			raw, _ := json.Marshal(first)
			for _, hidden := range []string{"authorization_url", "code_challenge", "state=", "/oauth/authorize"} {
				if strings.Contains(string(raw), hidden) {
					t.Errorf("sign_in_direct's result shows %s: %s", hidden, raw)
				}
			}
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
			if again := h.user.get(got["sign_in_url"].(string)); !strings.Contains(again, "expired or was already used") {
				t.Errorf("the start link opened twice: %s", again)
			}
			scanForSecrets(t, h.harness, first, res)
		})
	}
}

// TestSignInDirectOtherBrowser: a callback from a browser that did not open
// the start link (someone who got the link's redirect, or forged it) is
// refused without exchanging the code, and the real one still completes.
// The old code took the first callback with the right state, from anyone.
func TestSignInDirectOtherBrowser(t *testing.T) {
	t.Parallel()
	h := newDirectHarness(t)
	cs := h.connect(t, revisions[1])
	_, got := startDirect(t, cs)
	to, err := h.company.ApproveAuthorization(h.open(t, got), "acct_dana")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*userBrowser{
		"a browser without the cookie": h.browser(t, ""),
		"a browser that knows the deployment's credential but did not start the sign-in": h.browser(t, deploymentToken),
	} {
		if page := h.backIn(t, b, to, nil); !strings.Contains(page, "started in another browser") {
			t.Errorf("%s: %s", name, page)
		}
	}
	if _, st := status(t, cs, 0); st["status"] != "pending" || h.codeExchanges() != 0 {
		t.Fatalf("after callbacks from other browsers: %v, %d code exchanges", st, h.codeExchanges())
	}
	if page := h.back(t, to, nil); !strings.Contains(page, "You are signed in") {
		t.Fatalf("the real callback: %s", page)
	}
	if _, st := status(t, cs, 5); st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status = %v", st)
	}
}

// TestSignInDirectForgedThenReal: a forged callback in the user's own
// browser (a made-up code, another iss) uses nothing up: the sign-in stays
// pending and says so, and the real callback completes it. The old code
// ended the sign-in at the first callback, so a forgery could end it.
func TestSignInDirectForgedThenReal(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(url.Values){
		"forged code": func(q url.Values) { q.Set("code", "forged-code") },
		"other iss":   func(q url.Values) { q.Set("iss", "https://auth.evil.example") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newDirectHarness(t)
			cs := h.connect(t, revisions[0])
			_, got := startDirect(t, cs)
			to, err := h.company.ApproveAuthorization(h.open(t, got), "acct_dana")
			if err != nil {
				t.Fatal(err)
			}
			if page := h.back(t, to, edit); !strings.Contains(page, "could not be used") {
				t.Fatalf("forged callback page: %s", page)
			}
			if _, st := status(t, cs, 0); st["status"] != "pending" || !strings.Contains(st["detail"].(string), "still waiting") {
				t.Fatalf("after the forged callback: %v", st)
			}
			if page := h.back(t, to, nil); !strings.Contains(page, "You are signed in") {
				t.Fatalf("the real callback after a forged one: %s", page)
			}
			if _, st := status(t, cs, 5); st["status"] != "complete" || h.kept(t) == "" {
				t.Fatalf("sign_in_status = %v", st)
			}
		})
	}
}

// TestSignInDirectDenied: the user declining on the Company's page ends the
// sign-in as denied; nothing is exchanged.
func TestSignInDirectDenied(t *testing.T) {
	t.Parallel()
	h := newDirectHarness(t)
	cs := h.connect(t, revisions[1])
	_, got := startDirect(t, cs)
	to, err := h.company.DenyAuthorization(h.open(t, got))
	if err != nil {
		t.Fatal(err)
	}
	if page := h.back(t, to, nil); !strings.Contains(page, "declined") {
		t.Fatalf("callback page: %s", page)
	}
	res, st := status(t, cs, 5)
	if !res.IsError || st["status"] != "denied" || st["signed_in"] != false || h.kept(t) != "" || h.codeExchanges() != 0 {
		t.Fatalf("sign_in_status = %v", st)
	}
}

// TestSignInDirectWithoutCallback: without --public-url the tool says to use
// Device Sign-In.
func TestSignInDirectWithoutCallback(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, nil)
	res, got := call(t, h.connect(t, revisions[0]), "sign_in_direct", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
	text := res.Content[0].(*sdk.TextContent).Text
	if !res.IsError || got["error"] != "no_callback" || !strings.Contains(text, "sign_in_device") {
		t.Fatalf("sign_in_direct = %v %q", got, text)
	}
}
