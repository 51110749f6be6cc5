package browser

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestOpenAfterCrash: when Chromium dies (a crash, an out-of-memory kill),
// the next Open starts a new one instead of failing until poppy-mcp restarts.
func TestOpenAfterCrash(t *testing.T) {
	path, err := Find()
	if err != nil {
		if os.Getenv("POPPY_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("%v, and POPPY_REQUIRE_CHROMIUM=1", err)
		}
		t.Skip(err)
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Skip(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<title>Up</title><p>alive</p>")
	}))
	defer srv.Close()
	b, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Open(ctx, srv.URL, false); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	proc := chromedp.FromContext(b.ctx).Browser.Process() // this test's own Chromium, nobody else's
	oldProfile := b.profile
	b.mu.Unlock()
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.ctx.Err() == nil && time.Now().Before(deadline) { // chromedp notices the exit
		time.Sleep(50 * time.Millisecond)
	}
	p, err := b.Open(ctx, srv.URL, false)
	if err != nil || p.Title != "Up" {
		t.Fatalf("Open after the browser died: %v %+v", err, p)
	}
	if _, err := os.Stat(oldProfile); !os.IsNotExist(err) {
		t.Errorf("the dead browser's profile %s was left behind", oldProfile)
	}
}
