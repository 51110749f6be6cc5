package tools_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestPublicJoinPageNotServed: with a public URL, open_website's join page
// is served only on loopback, never under the public URL: fetched there,
// without the deployment's credential, with a foreign Host, or even with
// the credential, it is refused; on loopback a foreign Host is refused too.
// The old code served join_url under the public URL to anyone who had it,
// signing them in to the user's website Session.
func TestPublicJoinPageNotServed(t *testing.T) {
	t.Parallel()
	h := newDirectHarness(t)
	cs := h.connect(t, revisions[0])
	res, got := call(t, cs, "open_website", map[string]any{"domain": domain})
	join, _ := got["join_url"].(string)
	if res.IsError || got["loopback_only"] != true || !strings.Contains(got["next"].(string), "127.0.0.1") {
		t.Fatalf("open_website = %v", got)
	}
	token := join[strings.LastIndex(join, "/")+1:]
	for name, b := range map[string]*userBrowser{"without the credential": h.browser(t, ""), "with it": h.browser(t, deploymentToken)} {
		if page := b.get(publicURL + "/pages/p/" + token); strings.Contains(page, "assertion") || !strings.Contains(page, "expired or was already used") && !strings.Contains(page, "poppy_credential") {
			t.Errorf("the join page under the public URL, %s: %s", name, page)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, publicURL+"/pages/p/"+token, nil)
	req.Host = "rebound.attacker.example"
	if resp, err := h.company.Client().Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the public pages answered a foreign Host")
		}
	}
	if !strings.HasPrefix(join, h.pages.LoopbackURL()+"/p/") {
		t.Fatalf("join_url %q is not on the loopback listener", join)
	}
	req, _ = http.NewRequest(http.MethodGet, join, nil)
	req.Host = "rebound.attacker.example"
	resp, err := (&http.Client{Transport: h.local}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("the loopback join page with a foreign Host: %d, want 421", resp.StatusCode)
	}
	if page := newUserBrowser(t, h.local).get(join); !strings.Contains(page, `name="assertion"`) {
		t.Errorf("the join page on loopback does not join: %s", page)
	}
}

// TestPublicMediatedPageAsksForCredential: a mediated sign-in page under the
// public URL shows nothing of the sign-in to a browser without the
// deployment's credential (so whoever gets the link cannot sign the user's
// Session in to their own account); a browser that shows it once gets a
// cookie for this origin only, and then the page works. The old code served
// the page to anyone with the link.
func TestPublicMediatedPageAsksForCredential(t *testing.T) {
	t.Parallel()
	h := newDirectHarness(t)
	cs := h.connect(t, revisions[1])
	_, got := startMediated(t, cs)
	u, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(u, publicURL+"/pages/p/") {
		t.Fatalf("sign_in_url %q is not under the public URL", u)
	}
	stranger := h.browser(t, "")
	if page := stranger.get(u); strings.Contains(page, `name="password"`) || !strings.Contains(page, `name="poppy_credential"`) {
		t.Fatalf("the page without the cookie: %s", page)
	}
	if page := stranger.post(u, url.Values{"email": {"mallory@example.com"}, "password": {"x"}}); strings.Contains(page, "not accepted") || h.company.Count("auth.example.com", "/poppy/sign-in") != 0 {
		t.Fatalf("credentials posted without the cookie reached the Company: %s", page)
	}
	if page := h.user.fillCredentials(u, "dana@example.com", "correct-horse-battery"); !strings.Contains(page, "You are signed in") {
		t.Fatalf("with the credential: %s", page)
	}
	pu, _ := url.Parse(publicURL)
	cookies := h.user.c.Jar.Cookies(pu)
	if len(cookies) != 1 || cookies[0].Name != "__Host-poppy-pages" || strings.Contains(cookies[0].Value, deploymentToken) {
		t.Errorf("cookies for the public URL: %v", cookies)
	}
	if _, st := status(t, cs, 5); st["status"] != "complete" {
		t.Fatalf("sign_in_status = %v", st)
	}
}

// TestMediatedLookalikeName: a Company that calls itself "Google Account"
// is shown on the page, in the elicitation and in the tool's text by its
// domain and the host its credentials go to, with the name only as its own
// claim. The old page said "Sign in to Google Account" and nothing else.
func TestMediatedLookalikeName(t *testing.T) {
	t.Parallel()
	opts := &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		doc["organization"].(map[string]any)["name"] = "Google Account"
	}}
	h := newPublicHarness(t, opts)
	var message string
	cs := h.connectWith(t, revisions[1], &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			message = r.Params.Message
			page := h.user.get(r.Params.URL)
			for _, want := range []string{"<h1>Sign in to <code>example.com</code></h1>", `<code id="endpoint">auth.example.com</code>`, "calls itself &ldquo;Google Account&rdquo;"} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %s: %s", want, page)
				}
			}
			if strings.Contains(page, "Sign in to Google") {
				t.Errorf("the page takes the Company's name for its own: %s", page)
			}
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	})
	if _, got := startMediated(t, cs); got["elicitation"] != "accept" {
		t.Fatalf("sign_in_mediated = %v", got)
	}
	for _, want := range []string{"example.com", `calls itself Company text "Google Account"`, "auth.example.com"} {
		if !strings.Contains(message, want) {
			t.Errorf("the elicitation message %q lacks %s", message, want)
		}
	}
	res, _ := startMediated(t, h.connect(t, revisions[0])) // a client without elicitation: the tool's text
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(text, `example.com (which calls itself Company text "Google Account"; credentials go to auth.example.com)`) {
		t.Errorf("the tool's text: %q", text)
	}
}
