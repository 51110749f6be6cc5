package tools_test

// open_website in a real browser: headless Chromium opens the join_url,
// posts the assertion to poppytest's browser-session endpoint over TLS, and
// lands on the website in the Session (Poppy 0.1 §5). Skipped where no
// Chromium is installed, unless POPPY_REQUIRE_CHROMIUM=1 (CI), where that
// is a failure.

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/poppy-mcp/poppy-mcp/browser"
)

// chromiumPath finds Chromium, or skips (fails under POPPY_REQUIRE_CHROMIUM=1).
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := browser.Find()
	if err != nil {
		if os.Getenv("POPPY_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("%v, and POPPY_REQUIRE_CHROMIUM=1", err)
		}
		t.Skipf("%v: skipping the real-browser test", err)
	}
	return p
}

// chromiumFlags make Chromium resolve the Company's hosts to poppytest's
// listener and trust its CA.
func chromiumFlags(t *testing.T, h *harness) map[string]any {
	t.Helper()
	addr, d := h.company.Addr(), h.company.Domain()
	return map[string]any{
		"host-resolver-rules":                 "MAP " + d + " " + addr + ", MAP *." + d + " " + addr,
		"ignore-certificate-errors-spki-list": spkiHash(t, h.company.CAPEM()),
		"disable-quic":                        true,
	}
}

// spkiHash is the base64 SHA-256 of the CA's public key, for Chromium's
// --ignore-certificate-errors-spki-list (it matches any certificate of the
// chain, and poppytest's leaf comes with its CA).
func spkiHash(t *testing.T, caPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("poppytest CA: no PEM block")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// newChromium starts headless Chromium with a new profile, resolving the
// Company's hosts to poppytest's listener and trusting its CA.
func newChromium(t *testing.T, h *harness) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	for name, v := range chromiumFlags(t, h) {
		opts = append(opts, chromedp.Flag(name, v))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, for the life of ctx
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// landing is where the browser ended up after opening a join_url.
type landing struct {
	url, signedIn, session, text string
	cookie                       *network.Cookie
}

// join opens joinURL in the browser and waits for the Company's page.
func join(t *testing.T, ctx context.Context, joinURL string) landing {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var l landing
	err := chromedp.Do(ctx,
		chromedp.Navigate(joinURL),
		chromedp.WaitVisible(chromedp.CSS("#state")),
	)
	if err == nil {
		l.url, err = chromedp.Run(ctx, chromedp.Location())
	}
	var signedIn, session chromedp.AttributeResult
	if err == nil {
		signedIn, err = chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#state"), "data-signed-in"))
	}
	if err == nil {
		session, err = chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#state"), "data-session"))
	}
	if err == nil {
		l.text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	}
	var cookies network.GetCookiesResult
	if err == nil {
		cookies, err = chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{l.url}})
	}
	if err != nil {
		t.Fatalf("browsing %s: %v", joinURL, err)
	}
	l.signedIn, l.session = signedIn.Value, session.Value
	for _, c := range cookies.Cookies {
		if c.Name == "poppytest_session" {
			l.cookie = c
		}
	}
	return l
}

func TestOpenWebsiteInChromium(t *testing.T) {
	path := chromiumPath(t)
	t.Logf("Chromium: %s", path)
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	ctx := newChromium(t, h)
	open := func() map[string]any {
		res, got := call(t, cs, "open_website", map[string]any{"domain": "example.com", "url": "/orders"})
		if res.IsError || got["joins_session"] != true {
			t.Fatalf("open_website: %v", got)
		}
		scanForSecrets(t, h, res)
		return got
	}

	first := open()
	out := join(t, ctx, first["join_url"].(string))
	if out.url != "https://example.com/orders" || out.signedIn != "false" || out.session != first["session_id"] {
		t.Fatalf("landed on %s signed_in=%s session=%s, want /orders signed out in %v", out.url, out.signedIn, out.session, first["session_id"])
	}
	c := out.cookie
	// Poppy 0.1 §5: "MUST be Secure and HttpOnly, and use SameSite=Lax or None, not Strict."
	if c == nil || !c.Secure || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax {
		t.Fatalf("the Session cookie in the browser: %+v", c)
	}

	signIn(t, h, cs, "poppy:read") // Device Sign-In through poppy-mcp, approved at the Company
	in := join(t, ctx, open()["join_url"].(string))
	if in.signedIn != "true" || !strings.Contains(in.text, "ord_1042") || in.session != out.session {
		t.Fatalf("after sign-in: signed_in=%s session=%s\n%s", in.signedIn, in.session, in.text)
	}
	if in.cookie == nil || in.cookie.Value == c.Value {
		t.Error("the new join did not replace the cookie")
	}

	if res, got := call(t, cs, "sign_out", map[string]any{"domain": "example.com"}); res.IsError {
		t.Fatalf("sign_out = %v", got)
	}
	after := join(t, ctx, open()["join_url"].(string))
	if after.signedIn != "false" || strings.Contains(after.text, "ord_1042") {
		t.Fatalf("after sign-out: signed_in=%s\n%s", after.signedIn, after.text)
	}
	if n := h.company.Served("browser_session"); n != 3 {
		t.Errorf("the Company joined %d times, want 3", n)
	}
	for _, r := range h.company.Requests() {
		if r.Path == "/poppy/browser-session" && (r.RawQuery != "" || !strings.HasPrefix(string(r.Body), "assertion=ey")) {
			t.Errorf("the browser posted %q with query %q", r.Body, r.RawQuery)
		}
	}
}
