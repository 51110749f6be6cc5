package discovery_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestFetchDocumentRedirects: any document, not only discovery's, follows
// redirects only to HTTPS: a hop through plain http is refused before it is
// sent, even when it would have come back to https.
func TestFetchDocumentRedirects(t *testing.T) {
	srv := poppytest.NewServer(t, nil)
	srv.SetDocument("api.example.com", "/openapi.json", http.StatusFound,
		http.Header{"Location": {"http://api.example.com/hop"}}, nil)
	srv.SetDocument("api.example.com", "/hop", http.StatusFound,
		http.Header{"Location": {"https://api.example.com/real.json"}}, nil)
	d := discovery.New(srv.Client(), nil)
	_, err := d.FetchDocument(context.Background(), discovery.DocumentRequest{URL: "https://api.example.com/openapi.json"})
	var fe *discovery.FetchError
	if !errors.As(err, &fe) || !errors.Is(err, discovery.ErrInsecureRedirect) ||
		!strings.Contains(err.Error(), "redirected to a URL that is not HTTPS (http://api.example.com/hop)") {
		t.Fatalf("err = %v", err)
	}
	if n := srv.Count("api.example.com", "/hop"); n != 0 {
		t.Errorf("the http hop was sent %d times", n)
	}
	if _, err := d.FetchDocument(context.Background(), discovery.DocumentRequest{URL: "http://api.example.com/openapi.json"}); !errors.Is(err, discovery.ErrNotHTTPS) {
		t.Errorf("an http document URL: %v", err)
	}
}

// TestFetchDocumentCap: the cap is the caller's, per call.
func TestFetchDocumentCap(t *testing.T) {
	srv := poppytest.NewServer(t, nil)
	srv.SetDocument("api.example.com", "/big.json", 200, http.Header{"Content-Type": {"application/json"}}, []byte(`{"x":"`+strings.Repeat("a", 3<<20)+`"}`))
	d := discovery.New(srv.Client(), nil) // discovery documents: 1 MiB
	ctx := context.Background()
	if _, err := d.FetchDocument(ctx, discovery.DocumentRequest{URL: "https://api.example.com/big.json"}); !errors.Is(err, discovery.ErrTooLarge) {
		t.Errorf("with the default cap: %v", err)
	}
	f, err := d.FetchDocument(ctx, discovery.DocumentRequest{URL: "https://api.example.com/big.json", MaxBytes: 4 << 20})
	if err != nil || len(f.Body) < 3<<20 {
		t.Errorf("with a 4 MiB cap: %v", err)
	}
}

// TestFetchDocumentValidators: IfNoneMatch gets a 304 as NotModified, and
// KnownETag leaves the body of an unchanged document unread.
func TestFetchDocumentValidators(t *testing.T) {
	srv := poppytest.NewServer(t, nil)
	d := discovery.New(srv.Client(), nil)
	ctx := context.Background()
	u := "https://api.example.com/openapi.json"
	f, err := d.FetchDocument(ctx, discovery.DocumentRequest{URL: u})
	if err != nil || f.NotModified || len(f.Body) == 0 || f.Header.Get("ETag") == "" {
		t.Fatalf("first fetch: %v %+v", err, f)
	}
	etag := f.Header.Get("ETag")
	for _, r := range []discovery.DocumentRequest{{URL: u, IfNoneMatch: etag}, {URL: u, KnownETag: etag}} {
		f, err := d.FetchDocument(ctx, r)
		if err != nil || !f.NotModified || len(f.Body) != 0 {
			t.Errorf("%+v: %v %+v", r, err, f)
		}
	}
	if f, err := d.FetchDocument(ctx, discovery.DocumentRequest{URL: u, KnownETag: `"other"`}); err != nil || f.NotModified {
		t.Errorf("another ETag: %v %+v", err, f)
	}
}

// TestFetchDocumentHold: Poppy 0.1 §4.3. A 429 holds the endpoint for its
// Retry-After, in the Holds shared with the rest of the agent: the next
// fetch fails at once, saying when to retry, and sends nothing.
func TestFetchDocumentHold(t *testing.T) {
	srv := poppytest.NewServer(t, nil)
	srv.RateLimit("api.example.com", "/openapi.json", 1, 90*time.Second)
	holds := &retryafter.Holds{}
	d := discovery.New(srv.Client(), &discovery.Options{Holds: holds})
	ctx := context.Background()
	u := "https://api.example.com/openapi.json"
	for i := range 2 {
		_, err := d.FetchDocument(ctx, discovery.DocumentRequest{URL: u})
		var fe *discovery.FetchError
		if !errors.As(err, &fe) || !errors.Is(err, discovery.ErrRateLimited) || fe.RetryAfter < 80*time.Second || !strings.Contains(err.Error(), "retry after") {
			t.Fatalf("fetch %d: %v", i, err)
		}
	}
	if n := srv.Count("api.example.com", "/openapi.json"); n != 1 {
		t.Errorf("the document was asked %d times, want once", n)
	}
	if d := holds.Remaining(u, time.Now()); d < 80*time.Second {
		t.Errorf("the shared Holds holds %v", d)
	}
}

// TestFetchDocumentDeadline: a body sent a byte at a time ends at the
// fetch's own deadline, with an error that says so.
func TestFetchDocumentDeadline(t *testing.T) {
	srv := poppytest.NewServer(t, nil)
	srv.SlowBody("api.example.com", "/openapi.json", 50*time.Millisecond)
	d := discovery.New(srv.Client(), &discovery.Options{Timeout: 300 * time.Millisecond})
	_, err := d.FetchDocument(context.Background(), discovery.DocumentRequest{URL: "https://api.example.com/openapi.json"})
	if !errors.Is(err, discovery.ErrTooSlow) {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.FetchDocument(ctx, discovery.DocumentRequest{URL: "https://api.example.com/openapi.json"}); !errors.Is(err, context.Canceled) {
		t.Errorf("the caller's cancellation: %v", err)
	}
}

// TestDiscoverLenientContentType: documents served as text/plain (a file
// host's) are read when the body is a JSON object, each with a warning;
// an HTML page stays an error (a soft 404).
func TestDiscoverLenientContentType(t *testing.T) {
	srv := poppytest.NewServer(t, &poppytest.Options{DocumentContentType: "text/plain; charset=utf-8"})
	co := discover(t, srv, "example.com")
	if !co.OK() || co.Metadata == nil || co.Resources["https://mcp.example.com/mcp"] == nil || len(co.Findings) != 3 {
		t.Fatalf("findings %v", co.Findings)
	}
	for _, f := range co.Findings {
		if f.Severity != discovery.Warning || !strings.Contains(f.Message, `Content-Type Company text "text/plain; charset=utf-8"`) {
			t.Errorf("finding %v", f)
		}
	}
	srv.SetDocument("example.com", "/.well-known/poppy.json", 200, http.Header{"Content-Type": {"text/plain"}}, []byte("<html>Welcome</html>"))
	co = discover(t, srv, "example.com")
	requireFinding(t, co.Findings, discovery.Error, "3", "not JSON (a soft 404 page?)")
}
