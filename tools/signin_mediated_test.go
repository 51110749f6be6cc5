package tools_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// userBrowser is the user's browser on the local sign-in page.
type userBrowser struct {
	t *testing.T
	c *http.Client
	// credential is the deployment's, given when a page under a public URL
	// asks for it; "" for pages on loopback.
	credential string
	last       *url.URL // where the last request ended, after redirects
}

// newUserBrowser is the user's browser, reaching poppy-mcp's pages with
// local (harness.local).
func newUserBrowser(t *testing.T, local http.RoundTripper) *userBrowser {
	return &userBrowser{t: t, c: &http.Client{Transport: local}}
}

func (b *userBrowser) get(u string) string {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.last = resp.Request.URL
	if resp.StatusCode == http.StatusUnauthorized && b.credential != "" && strings.Contains(string(body), `name="poppy_credential"`) {
		return b.post(u, url.Values{"poppy_credential": {b.credential}}) // once: the cookie stays
	}
	return string(body)
}

// post submits the page's form as a browser does, from the page's origin.
func (b *userBrowser) post(u string, form url.Values) string {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	pu, _ := url.Parse(u)
	req.Header.Set("Origin", pu.Scheme+"://"+pu.Host)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.last = resp.Request.URL
	return string(body)
}

var inputRE = regexp.MustCompile(`<input name="([^"]+)" type="([^"]+)"`)

// fillCredentials checks the credential form and posts email and password.
func (b *userBrowser) fillCredentials(u, email, password string) string {
	b.t.Helper()
	page := b.get(u)
	inputs := inputRE.FindAllStringSubmatch(page, -1)
	if len(inputs) != 2 || inputs[0][1] != "email" || inputs[0][2] != "text" || inputs[1][1] != "password" || inputs[1][2] != "password" {
		b.t.Fatalf("credential form inputs %v in %s", inputs, page)
	}
	return b.post(u, url.Values{"email": {email}, "password": {password}})
}

// signInID is the sign_in_id of the last code the agent posted to the Company.
func signInID(t *testing.T, s *poppytest.Server) string {
	t.Helper()
	id := ""
	for _, r := range s.Requests() {
		if rest, ok := strings.CutPrefix(r.Path, "/poppy/sign-in/"); ok {
			id = rest
		}
	}
	if id == "" {
		t.Fatal("no code was posted to the Company")
	}
	return id
}

// codeStep posts a wrong code, then the right one, on the code page.
func codeStep(t *testing.T, b *userBrowser, s *poppytest.Server, u, page string) string {
	t.Helper()
	if !strings.Contains(page, `name="code"`) || !strings.Contains(page, "Text to the phone number ending in 71") {
		t.Fatalf("code page: %s", page)
	}
	if again := b.post(u, url.Values{"code": {"nope"}}); !strings.Contains(again, "not accepted") {
		t.Fatalf("after a wrong code: %s", again)
	}
	return b.post(u, url.Values{"code": {s.LastCode(signInID(t, s))}})
}

func startMediated(t *testing.T, cs *sdk.ClientSession) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	return call(t, cs, "sign_in_mediated", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
}

// TestSignInMediatedPage: without URL elicitation the result carries
// sign_in_url; a wrong password asks again, then a one-time code (a wrong
// one asks again) completes the sign-in.
func TestSignInMediatedPage(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, nil)
			cs := h.connect(t, rev)
			res, got := startMediated(t, cs)
			u, _ := got["sign_in_url"].(string)
			if res.IsError || got["status"] != "pending" || !strings.HasPrefix(u, h.pages.BaseURL()) {
				t.Fatalf("sign_in_mediated = %v", got)
			}
			b := newUserBrowser(t, h.local)
			if page := b.fillCredentials(u, "sam@example.com", "wrong"); !strings.Contains(page, "not accepted") {
				t.Fatalf("after a wrong password: %s", page)
			}
			page := b.fillCredentials(u, "sam@example.com", "sam-secret-42")
			if done := codeStep(t, b, h.company, u, page); !strings.Contains(done, "You are signed in") {
				t.Fatalf("after the right code: %s", done)
			}
			final, st := status(t, cs, 5)
			if st["status"] != "complete" || st["signed_in"] != true || h.kept(t) == "" {
				t.Fatalf("sign_in_status = %v", st)
			}
			if gone := b.get(u); !strings.Contains(gone, "expired or was already used") {
				t.Errorf("the page is still open after sign-in: %s", gone)
			}
			scanForSecrets(t, h, res, final)
			if strings.Contains(h.logs.String(), "sam-secret-42") {
				t.Error("the password was logged")
			}
		})
	}
}

// TestSignInMediatedAttemptLimit: wrong codes up to the Company's limit fail
// the sign-in and leave no Account Token.
func TestSignInMediatedAttemptLimit(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, &poppytest.Options{MediatedAttempts: 2})
	cs := h.connect(t, revisions[1])
	_, got := startMediated(t, cs)
	u := got["sign_in_url"].(string)
	b := newUserBrowser(t, h.local)
	b.fillCredentials(u, "sam@example.com", "sam-secret-42")
	b.post(u, url.Values{"code": {"nope"}})
	if page := b.post(u, url.Values{"code": {"nope"}}); !strings.Contains(page, "Sign-in failed") {
		t.Fatalf("after the last wrong code: %s", page)
	}
	res, st := status(t, cs, 0)
	if !res.IsError || st["status"] != "failed" || st["signed_in"] != false || h.kept(t) != "" {
		t.Fatalf("sign_in_status = %v", st)
	}
}

// TestSignInMediatedElicitation: a client declaring URL elicitation gets the
// page offered that way (its handler acts as the user's browser), and the
// model never sees the page's URL.
func TestSignInMediatedElicitation(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, nil)
			b := newUserBrowser(t, h.local)
			var offered []string
			cs := h.connectWith(t, rev, &sdk.ClientOptions{
				Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					offered = append(offered, r.Params.URL)
					if r.Params.Mode != "url" || !strings.HasPrefix(r.Params.URL, h.pages.BaseURL()) {
						t.Errorf("elicitation %+v", r.Params)
					}
					if page := b.fillCredentials(r.Params.URL, "dana@example.com", "correct-horse-battery"); !strings.Contains(page, "You are signed in") {
						t.Errorf("sign-in page: %s", page)
					}
					return &sdk.ElicitResult{Action: "accept"}, nil
				},
			})
			res, got := startMediated(t, cs)
			if res.IsError || got["status"] != "complete" || got["elicitation"] != "accept" || got["signed_in"] != true || len(offered) != 1 {
				t.Fatalf("sign_in_mediated = %v (offered %d)", got, len(offered))
			}
			if _, ok := got["sign_in_url"]; ok {
				t.Error("the page URL went to the model although it was elicited")
			}
			scanForSecrets(t, h, res)
		})
	}
}

// TestSignInMediatedDeclined: the user declines to open the page the
// client offered. The result is the one without elicitation: the page stays
// open and its link is in the text, for the model to show if the user still
// wants to sign in (before, the page was closed and the sign-in failed).
func TestSignInMediatedDeclined(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, nil)
	cs := h.connectWith(t, revisions[1], &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "decline"}, nil
		},
	})
	res, got := startMediated(t, cs)
	link, _ := got["sign_in_url"].(string)
	if res.IsError || got["status"] != "pending" || got["elicitation"] != "decline" || link == "" || !strings.Contains(textOf(res), link) {
		t.Fatalf("sign_in_mediated = %v", got)
	}
}

// postGone posts form to the page u as a browser that has already gone (a
// closed tab, a second click): the request's context is cancelled before
// the page handles it.
func postGone(t *testing.T, h *harness, u string, form url.Values) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+req.Host)
	rec := httptest.NewRecorder()
	h.pages.LoopbackHandler().ServeHTTP(rec, req)
	return rec.Body.String()
}

// TestSignInMediatedBrowserGone: the Company is asked to the end although
// the browser left: credentials or a code it has taken may already have
// signed the user in, so cancelling would lose the Account Token.
func TestSignInMediatedBrowserGone(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, nil)
	cs := h.connect(t, revisions[1])
	_, got := startMediated(t, cs)
	u := got["sign_in_url"].(string)
	if page := postGone(t, h, u, url.Values{"email": {"sam@example.com"}, "password": {"sam-secret-42"}}); !strings.Contains(page, `name="code"`) {
		t.Fatalf("credentials posted by a browser that left: %s", page)
	}
	if again := newUserBrowser(t, h.local).post(u, url.Values{"code": {"nope"}}); !strings.Contains(again, "not accepted") {
		t.Fatalf("after a wrong code: %s", again) // and signInID can see the sign-in's id
	}
	if page := postGone(t, h, u, url.Values{"code": {h.company.LastCode(signInID(t, h.company))}}); !strings.Contains(page, "You are signed in") {
		t.Fatalf("code posted by a browser that left: %s", page)
	}
	if _, st := status(t, cs, 0); st["status"] != "complete" || st["signed_in"] != true || h.kept(t) == "" {
		t.Fatalf("sign_in_status = %v", st)
	}
}
