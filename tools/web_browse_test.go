package tools_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/browser"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// withBrowser is h's poppy-mcp again, driving a headless Chromium of its own.
func withBrowser(t *testing.T, h *harness) *harness {
	t.Helper()
	b, err := browser.New(chromiumPath(t), &browser.Options{Flags: chromiumFlags(t, h)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ts := tools.New(tools.Deps{
		Discovery: discovery.New(&http.Client{Transport: cache.New(h.company.Transport(), nil)}, nil),
		Agent:     h.agent, Store: h.store, Pages: h.pages, Browser: b,
		Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
	})
	hs := httptest.NewServer(ts.HTTPHandler())
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last-in first-out)
	h2 := *h
	h2.tools, h2.url = ts, hs.URL+"/mcp"
	return &h2
}

func TestBrowsePage(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := withBrowser(t, newHarness(t, nil))
			cs := h.connect(t, rev)
			res, got := call(t, cs, "browse_page", map[string]any{"domain": "example.com", "url": "/orders", "screenshot": true})
			text, _ := got["text"].(string)
			if res.IsError || got["joined_session"] != true || got["url"] != "https://example.com/orders" ||
				!strings.Contains(text, "Signed out") || got["company_text"] == "" {
				t.Fatalf("browse_page = %v (isError %v)", got, res.IsError)
			}
			if img, ok := res.Content[len(res.Content)-1].(*sdk.ImageContent); !ok || img.MIMEType != "image/png" || len(img.Data) < 100 {
				t.Errorf("no PNG screenshot in %v", res.Content)
			}
			if err := h.company.SignInSession(got["session_id"].(string), "acct_dana", "poppy:read"); err != nil {
				t.Fatal(err)
			}
			res, got = call(t, cs, "browse_page", map[string]any{"domain": "example.com", "url": "https://www.example.com/orders"})
			if text, _ = got["text"].(string); !strings.Contains(text, "Signed in as dana@example.com") || !strings.Contains(text, "ord_1042") {
				t.Errorf("signed in: %v", got)
			}
			if len(res.Content) != 1 {
				t.Errorf("a screenshot nobody asked for: %d contents", len(res.Content))
			}
			if n := h.company.Served("browser_session"); n != 2 {
				t.Errorf("the browser joined %d times, want 2", n)
			}
			scanForSecrets(t, h, res)
		})
	}
}

// TestBrowsePageWithoutEndpoint: the browser is an ordinary visitor.
func TestBrowsePageWithoutEndpoint(t *testing.T) {
	h := withBrowser(t, newHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) { delete(doc, "web") }}))
	cs := h.connect(t, revisions[1])
	res, got := call(t, cs, "browse_page", map[string]any{"domain": "example.com", "url": "/orders"})
	if res.IsError || got["joined_session"] != false || !strings.Contains(got["text"].(string), "browsing as a visitor") {
		t.Errorf("without the endpoint: %v", got)
	}
	if _, got = call(t, cs, "browse_page", map[string]any{"domain": "example.com", "url": "https://evil.example/"}); got["error"] != "invalid_url" {
		t.Errorf("a foreign url: %v", got)
	}
	if n := h.company.Served("browser_session"); n != 0 {
		t.Errorf("joined %d times without an endpoint", n)
	}
}

// TestBrowsePageDefinition: browse_page is offered only with a browser
// (which starts only when a page is opened), and its definition is pinned.
func TestBrowsePageDefinition(t *testing.T) {
	h := newHarness(t, nil)
	if hasTool(t, h.connect(t, revisions[0]), "browse_page") != nil {
		t.Error("browse_page is offered without a browser")
	}
	b, err := browser.New("/nonexistent/chromium", nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := tools.New(tools.Deps{Discovery: discovery.New(h.company.Client(), nil), Browser: b})
	hs := httptest.NewServer(ts.HTTPHandler())
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last-in first-out)
	h2 := *h
	h2.url = hs.URL + "/mcp"
	tool := hasTool(t, h2.connect(t, revisions[0]), "browse_page")
	if tool == nil {
		t.Fatal("browse_page is not offered with a browser")
	}
	if a := tool.Annotations; len(tool.Description) > 400 || a == nil || a.Title == "" || a.DestructiveHint == nil || a.OpenWorldHint == nil {
		t.Errorf("browse_page: description of %d bytes, annotations %+v", len(tool.Description), a)
	}
	golden(t, "browse_page.golden.json", tool)
}

// hasTool returns the listed tool called name, or nil.
func hasTool(t *testing.T, cs *sdk.ClientSession, name string) *sdk.Tool {
	t.Helper()
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name == name {
			return tool
		}
	}
	return nil
}
