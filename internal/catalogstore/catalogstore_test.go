package catalogstore

import (
	"context"
	"errors"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestGetPut: a catalog comes back with its version under the key it was
// kept under, and not under another.
func TestGetPut(t *testing.T) {
	t.Parallel()
	ctx, st := context.Background(), teststore.Open(t)
	const u = "https://api.example.com/openapi.json"
	if _, _, err := Get(ctx, st, u, "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("nothing kept: %v", err)
	}
	if err := Put(ctx, st, u, "k1", `"etag-1"`, []byte("catalog")); err != nil {
		t.Fatal(err)
	}
	if v, data, err := Get(ctx, st, u, "k1"); err != nil || v != `"etag-1"` || string(data) != "catalog" {
		t.Errorf("Get: %q %q %v", v, data, err)
	}
	if _, _, err := Get(ctx, st, u, "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("under another key: %v, want store.ErrNotFound", err)
	}
}

// TestForgetCompany: the catalogs named by the Company's poppy.json or on
// its domains (and their hosts) go; another Company's, and a look-alike
// domain's, stay.
func TestForgetCompany(t *testing.T) {
	t.Parallel()
	ctx, st := context.Background(), teststore.Open(t)
	for _, u := range []string{"https://api.example.com/openapi.json", "https://example.com/api.yaml",
		"https://cdn.elsewhere.test/example.json", "https://other.test/openapi.json", "https://notexample.com/openapi.json",
		"http://api.example.com/plain.json"} {
		if err := Put(ctx, st, u, "k", "v", []byte("c")); err != nil {
			t.Fatal(err)
		}
	}
	n, err := ForgetCompany(ctx, st, []string{"https://cdn.elsewhere.test/example.json"}, []string{"example.com"})
	if err != nil || n != 3 {
		t.Fatalf("ForgetCompany: %d, %v; want 3", n, err)
	}
	names, _ := st.BlobNames(ctx)
	want := map[string]bool{"http://api.example.com/plain.json": true, "https://notexample.com/openapi.json": true, "https://other.test/openapi.json": true}
	if len(names) != len(want) {
		t.Fatalf("left: %q", names)
	}
	for _, name := range names {
		if !want[name] {
			t.Errorf("%s was kept", name)
		}
	}
}
