package browser_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/browser"
)

// chromium finds Chromium, or skips (fails under POPPY_REQUIRE_CHROMIUM=1).
func chromium(t *testing.T) string {
	t.Helper()
	p, err := browser.Find()
	if err != nil {
		if os.Getenv("POPPY_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("%v, and POPPY_REQUIRE_CHROMIUM=1", err)
		}
		t.Skipf("%v: skipping", err)
	}
	return p
}

// site serves a page, a page that posts a form on load, and where it lands.
func site(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><meta charset="utf-8"><title>Home</title><body><h1>Welcome</h1><p>` + strings.Repeat("é", 50) + `</p><script>document.body.append("scripted")</script>`))
	})
	mux.HandleFunc("GET /auto", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>Joining</title><form method="post" action="/join"><input type="hidden" name="a" value="1"></form><script>document.forms[0].submit()</script>`))
	})
	mux.HandleFunc("POST /join", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("a") != "1" {
			http.Error(w, "no form", http.StatusBadRequest)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "joined", Value: "yes", Path: "/"})
		http.Redirect(w, r, "/landed", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /landed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		c, _ := r.Cookie("joined")
		v := "no cookie"
		if c != nil {
			v = "cookie " + c.Value
		}
		w.Write([]byte(`<!doctype html><title>Landed</title><body>Landed with ` + v))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestOpen(t *testing.T) {
	srv := site(t)
	b, err := browser.New(chromium(t), &browser.Options{MaxText: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	p, err := b.Open(ctx, srv.URL+"/", true)
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Home" || !strings.HasPrefix(p.Text, "Welcome") || !p.Truncated || len(p.Text) > 40 || !strings.HasSuffix(p.Text, "é") {
		t.Errorf("page = %q %q (truncated %v)", p.Title, p.Text, p.Truncated)
	}
	if !bytes.HasPrefix(p.Screenshot, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot is not a PNG (%d bytes)", len(p.Screenshot))
	}
	// A page that posts a form on load is followed to where it lands, and
	// the cookie it set is kept for later pages.
	p, err = b.Open(ctx, srv.URL+"/auto", false)
	if err != nil {
		t.Fatal(err)
	}
	if p.URL != srv.URL+"/landed" || p.Text != "Landed with cookie yes" || p.Screenshot != nil {
		t.Errorf("after the form: %s %q", p.URL, p.Text)
	}
	if p, err = b.Open(ctx, srv.URL+"/landed", false); err != nil || p.Text != "Landed with cookie yes" {
		t.Errorf("the cookie was not kept: %v %+v", err, p)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	if _, err := b.Open(ctx, srv.URL, false); !errors.Is(err, browser.ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
}

func TestOpenCanceled(t *testing.T) {
	b, err := browser.New(chromium(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Open(ctx, "http://127.0.0.1:1/", false); err == nil {
		t.Error("a canceled Open succeeded")
	}
}

func TestNewNeedsPath(t *testing.T) {
	if _, err := browser.New("", nil); err == nil {
		t.Error("New without a path succeeded")
	}
}

// TestOpenForKeepsPeopleApart: the cookie a site sets in one person's
// pages (a joined Session) is sent on that person's later pages only: not
// on another person's, nor on the default person's. The old code had one
// profile for everyone, so the second person's page came with the first
// person's cookie.
func TestOpenForKeepsPeopleApart(t *testing.T) {
	srv := site(t)
	b, err := browser.New(chromium(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if p, err := b.OpenFor(ctx, "person-a", srv.URL+"/auto", false); err != nil || p.Text != "Landed with cookie yes" {
		t.Fatalf("person a joins: %v %+v", err, p)
	}
	for _, owner := range []string{"person-b", ""} {
		if p, err := b.OpenFor(ctx, owner, srv.URL+"/landed", false); err != nil || p.Text != "Landed with no cookie" {
			t.Errorf("%q after person a joined: %v %+v", owner, err, p)
		}
	}
	if p, err := b.OpenFor(ctx, "person-a", srv.URL+"/landed", false); err != nil || p.Text != "Landed with cookie yes" {
		t.Errorf("person a's cookie was not kept: %v %+v", err, p)
	}
}
