// Package browser drives a headless Chromium that belongs to poppy-mcp: the
// Personal Agent's own browser, which joins the User's Session on a
// Company's website (Poppy 0.1 §5: "The Personal Agent MUST post browser
// assertions only from a browser it controls, never from the User's own
// browser") and reads its pages for the model.
//
// It knows nothing of the protocol: it opens URLs in one persistent browser
// profile, so the Session cookie a join sets is sent on the pages opened
// after it, and returns each page's readable text and, on request, a
// screenshot. The browser starts at the first Open and stops at Close.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// Options configure a Browser. The zero value is usable.
type Options struct {
	// Flags are extra Chromium command-line flags, name to value (true for
	// a flag without a value), such as "host-resolver-rules". Nil: none.
	Flags map[string]any
	// Timeout bounds each Open. Zero: 30 seconds.
	Timeout time.Duration
	// MaxText is the most bytes of page text Open returns; longer text is
	// cut and Page.Truncated set. Zero: 32 KiB.
	MaxText int
	// Width and Height are the window size, for screenshots. Zero: 1280 by 900.
	Width, Height int
	// Dial, when set, opens every connection Chromium makes: Chromium is
	// told to use an in-process proxy on 127.0.0.1 that connects through
	// Dial, loopback included (--proxy-server, --proxy-bypass-list=<-loopback>),
	// with QUIC off and WebRTC kept from sending UDP outside the proxy. So a
	// page, a redirect or a script reaches only what Dial allows, and name
	// mappings are Dial's to make. Nil: Chromium connects by itself.
	Dial DialFunc
}

// Page is what Open found.
type Page struct {
	// URL is where the browser ended up, after redirects and joins.
	URL string
	// Title is the document's title.
	Title string
	// Text is the body's rendered text (innerText), cut at MaxText.
	Text string
	// Truncated reports that Text was cut.
	Truncated bool
	// Screenshot is a PNG of the visible viewport, when asked for.
	Screenshot []byte
}

// Browser is one headless Chromium with its own new profile. It is safe for
// concurrent use; pages open one at a time. The pages of the default
// person ("") open in one tab; each other person's (OpenFor) in a tab of a
// browser context of their own, which shares no cookie or storage with
// anyone else's.
type Browser struct {
	path string
	opts Options

	// mu serializes Opens and guards everything below.
	mu      sync.Mutex
	ctx     context.Context // the browser's tab; nil until started
	cancel  context.CancelFunc
	profile string // the user data dir, removed at Close
	proxy   *proxy // with Options.Dial, while the browser runs
	closed  bool
	people  map[string]*personTab // by owner: each person's tab in their own browser context
}

// personTab is a person's tab, in a browser context of their own.
type personTab struct {
	ctx    context.Context
	cancel context.CancelFunc // disposes of the browser context
}

// Find returns the path of a Chromium on this machine: the POPPY_CHROMIUM
// environment variable if set, else the first of chromium, chromium-browser
// and google-chrome on PATH.
func Find() (string, error) {
	if p := os.Getenv("POPPY_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browser: no Chromium found (Debian: apt-get install -y chromium; or set POPPY_CHROMIUM)")
}

// ErrClosed is returned by Open after Close.
var ErrClosed = errors.New("browser: closed")

// New returns a Browser that runs the Chromium executable at path. Nothing
// starts until the first Open.
func New(path string, opts *Options) (*Browser, error) {
	if path == "" {
		return nil, errors.New("browser: no Chromium executable given")
	}
	b := &Browser{path: path}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Timeout <= 0 {
		b.opts.Timeout = 30 * time.Second
	}
	if b.opts.MaxText <= 0 {
		b.opts.MaxText = 32 << 10
	}
	if b.opts.Width <= 0 || b.opts.Height <= 0 {
		b.opts.Width, b.opts.Height = 1280, 900
	}
	return b, nil
}

// startLocked starts Chromium with a new profile; b.mu is held.
func (b *Browser) startLocked() error {
	profile, err := os.MkdirTemp("", "poppy-mcp-browser-")
	if err != nil {
		return fmt.Errorf("browser: profile: %w", err)
	}
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(b.path), chromedp.UserDataDir(profile),
		chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(b.opts.Width, b.opts.Height),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	}
	if os.Geteuid() == 0 {
		flags = append(flags, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	for name, v := range b.opts.Flags {
		flags = append(flags, chromedp.Flag(name, v))
	}
	var px *proxy
	if b.opts.Dial != nil {
		if px, err = startProxy(b.opts.Dial); err != nil {
			os.RemoveAll(profile)
			return fmt.Errorf("browser: proxy: %w", err)
		}
		flags = append(flags, proxyFlags(px.url())...)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), flags...)
	ctx, cancelTab := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // the first run starts the browser for the life of ctx
		cancelTab()
		cancelAlloc()
		if px != nil {
			px.close()
		}
		os.RemoveAll(profile)
		return fmt.Errorf("browser: starting %s: %w", b.path, err)
	}
	b.ctx, b.profile, b.proxy = ctx, profile, px
	b.cancel = func() { cancelTab(); cancelAlloc() }
	return nil
}

// proxyFlags send every connection through the proxy at proxyURL. They come
// after Options.Flags, so they win over a flag of the same name there.
func proxyFlags(proxyURL string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ProxyServer(proxyURL),
		// Chromium bypasses a proxy for loopback unless told not to.
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// QUIC and WebRTC's UDP would not go through an HTTP proxy.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
	}
}

// Open loads url in the browser's tab, waits for the page to load, and
// returns its text, with a screenshot when screenshot is set. A page that
// submits a form on load (a Session join) is followed to where it lands.
func (b *Browser) Open(ctx context.Context, url string, screenshot bool) (*Page, error) {
	return b.OpenFor(ctx, "", url, screenshot)
}

// OpenFor is Open for the person owner (an opaque key; "" is the default
// person, whose pages Open opens): the page opens in that person's own
// browser context, so the cookies a Company's website sets for one person
// (a joined Session) are never sent on another's pages.
func (b *Browser) OpenFor(ctx context.Context, owner, url string, screenshot bool) (*Page, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if b.ctx != nil && b.ctx.Err() != nil {
		b.stopLocked() // Chromium died (a crash, an out-of-memory kill): start a new one
	}
	if b.ctx == nil {
		if err := b.startLocked(); err != nil {
			return nil, err
		}
	}
	base, err := b.tabLocked(owner)
	if err != nil {
		return nil, err
	}
	tab, cancel := context.WithTimeout(base, b.opts.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // the caller's cancellation stops the load too
	defer stop()
	p, err := b.load(tab, url, screenshot)
	if err != nil {
		return nil, fmt.Errorf("browser: opening %s: %w", url, err)
	}
	return p, nil
}

// tabLocked returns the tab of owner, making their browser context on first
// use; b.mu is held.
func (b *Browser) tabLocked(owner string) (context.Context, error) {
	if owner == "" {
		return b.ctx, nil
	}
	if pt := b.people[owner]; pt != nil && pt.ctx.Err() == nil {
		return pt.ctx, nil
	}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(ctx); err != nil { // creates the browser context and its tab
		cancel()
		return nil, fmt.Errorf("browser: a browser context: %w", err)
	}
	if b.people == nil {
		b.people = map[string]*personTab{}
	}
	b.people[owner] = &personTab{ctx: ctx, cancel: cancel}
	return ctx, nil
}

// load runs the page's actions in tab.
func (b *Browser) load(tab context.Context, url string, screenshot bool) (*Page, error) {
	if err := chromedp.Do(tab, chromedp.Navigate(url), waitSettled()); err != nil {
		return nil, err
	}
	p := &Page{}
	var err error
	if p.URL, err = chromedp.Run(tab, chromedp.Location()); err != nil {
		return nil, err
	}
	if p.Title, err = chromedp.Run(tab, chromedp.Title()); err != nil {
		return nil, err
	}
	if p.Text, err = chromedp.Run(tab, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`)); err != nil {
		return nil, err
	}
	p.Text, p.Truncated = cut(p.Text, b.opts.MaxText)
	if screenshot {
		if p.Screenshot, err = chromedp.Run(tab, chromedp.CaptureScreenshot()); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// waitSettled waits until the document has loaded and is not about to
// navigate away: a join page submits its form on load, so the first load
// is not the page the caller wants.
func waitSettled() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var (
			last    string
			lastErr error
		)
		for stable := 0; stable < 3; {
			// Evaluating while a navigation replaces the document fails: that
			// is not settled either, so try again.
			loc, err := chromedp.Evaluate[string](`document.readyState === "complete" ? location.href : ""`)(ctx, t)
			if err != nil || loc == "" || loc != last {
				last, stable, lastErr = loc, 0, err
			} else {
				stable++
			}
			select {
			case <-ctx.Done():
				if lastErr != nil {
					return fmt.Errorf("%w (last: %v)", ctx.Err(), lastErr)
				}
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		return nil
	})
}

// cut shortens s to at most max bytes, on a rune boundary.
func cut(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	i := max
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i], true
}

// Close stops Chromium and removes its profile. Open fails after it.
func (b *Browser) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.stopLocked()
}

// stopLocked stops Chromium, if it runs, and removes its profile; b.mu is held.
func (b *Browser) stopLocked() error {
	if b.ctx == nil {
		return nil
	}
	for _, pt := range b.people {
		pt.cancel()
	}
	b.people = nil
	_ = chromedp.Cancel(b.ctx) // closes the browser gracefully
	b.cancel()
	b.ctx = nil
	if b.proxy != nil {
		b.proxy.close()
		b.proxy = nil
	}
	return os.RemoveAll(b.profile)
}
