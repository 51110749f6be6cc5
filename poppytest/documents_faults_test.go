package poppytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestDocumentContentType: the knob serves every discovery document and the
// OpenAPI document with the Content-Type asked for.
func TestDocumentContentType(t *testing.T) {
	s := poppytest.NewServer(t, &poppytest.Options{DocumentContentType: "text/plain; charset=utf-8"})
	for _, u := range []string{
		s.URL("example.com", "/.well-known/poppy.json"), s.URL("www.example.com", "/.well-known/poppy.json"),
		s.URL("auth.example.com", "/.well-known/oauth-authorization-server"),
		s.URL("mcp.example.com", "/.well-known/oauth-protected-resource/mcp"), s.URL("api.example.com", "/openapi.json"),
	} {
		status, h, body := get(t, s, u, nil)
		if status != 200 || h.Get("Content-Type") != "text/plain; charset=utf-8" || len(body) == 0 || body[0] != '{' {
			t.Errorf("%s: %d %q %.20q", u, status, h.Get("Content-Type"), body)
		}
	}
}

// TestRateLimitDocuments: RateLimit applies to documents as to any endpoint:
// a 429 with Retry-After, then a violation for a request sent too early.
func TestRateLimitDocuments(t *testing.T) {
	s, rt := newRecorded(t, nil)
	for _, hp := range [][2]string{{"example.com", "/.well-known/poppy.json"}, {"api.example.com", "/openapi.json"}} {
		s.RateLimit(hp[0], hp[1], 1, time.Minute)
		status, h, _ := get(t, s, s.URL(hp[0], hp[1]), nil)
		if status != http.StatusTooManyRequests || h.Get("Retry-After") != "60" {
			t.Errorf("%s%s: %d, Retry-After %q", hp[0], hp[1], status, h.Get("Retry-After"))
		}
	}
	wantNoViolation(t, s, rt)
	get(t, s, s.URL("example.com", "/.well-known/poppy.json"), nil) // within the minute
	wantViolation(t, s, rt, "§4.3", "/.well-known/poppy.json", "before Retry-After")
}

// TestSlowBody: the headers come at once and the body a byte at a time,
// until the client leaves; an interval of 0 removes the rule.
func TestSlowBody(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	u := s.URL("example.com", "/.well-known/poppy.json")
	s.SlowBody("example.com", "/.well-known/poppy.json", 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength < 100 {
		t.Fatalf("headers: %d, Content-Length %d", resp.StatusCode, resp.ContentLength)
	}
	buf := make([]byte, resp.ContentLength)
	n, err := resp.Body.Read(buf)
	if err != nil || n < 1 || int64(n) >= resp.ContentLength {
		t.Errorf("the first read gave %d of %d bytes (%v), want a few", n, resp.ContentLength, err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("after the client left: %v", err)
	}
	s.SlowBody("example.com", "/.well-known/poppy.json", 0)
	if status, _, body := get(t, s, u, nil); status != 200 || len(body) < 100 {
		t.Errorf("after the rule is removed: %d, %d bytes", status, len(body))
	}
}
