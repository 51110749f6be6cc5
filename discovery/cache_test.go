package discovery_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestDiscoverCached: Poppy 0.1 §3 and §3.2 "SHOULD cache ... according to its
// HTTP caching headers". A repeated discovery within max-age makes zero
// requests; refresh revalidates with ETags (304s) and changes nothing.
func TestDiscoverCached(t *testing.T) {
	srv := poppytest.NewServer(t, nil) // documents carry max-age=300 and an ETag
	ct := cache.New(srv.Transport(), nil)
	d := discovery.New(&http.Client{Transport: ct}, nil)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if co, err := d.Discover(ctx, "example.com", false); err != nil || !co.OK() {
			t.Fatalf("discover %d: %v %v", i, err, co.Findings)
		}
	}
	total := len(srv.Requests())
	if total != 3 { // poppy.json, RFC 8414 metadata, RFC 9728 metadata, once each
		t.Fatalf("three discoveries made %d requests, want 3", total)
	}
	if co, err := d.Discover(ctx, "example.com", true); err != nil || !co.OK() {
		t.Fatalf("refresh: %v", err)
	}
	reqs := srv.Requests()[total:]
	if len(reqs) != 3 {
		t.Fatalf("refresh made %d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("If-None-Match") == "" {
			t.Errorf("refresh of %s%s did not revalidate with If-None-Match", r.Host, r.Path)
		}
	}
	if st := ct.Stats(); st.Revalidated != 3 {
		t.Errorf("stats = %+v, want 3 revalidated", st)
	}
}

// TestDiscoverNoStore: a Company that forbids caching is fetched every time.
func TestDiscoverNoStore(t *testing.T) {
	srv := poppytest.NewServer(t, &poppytest.Options{CacheControl: "no-store"})
	d := discovery.New(&http.Client{Transport: cache.New(srv.Transport(), nil)}, nil)
	for i := 0; i < 2; i++ {
		if _, err := d.Discover(context.Background(), "example.com", false); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Count("example.com", "/.well-known/poppy.json"); n != 2 {
		t.Errorf("poppy.json fetched %d times, want 2", n)
	}
}
