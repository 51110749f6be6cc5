package openapi2tools

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const searchDoc = `{"openapi": "3.1.0", "servers": [{"url": "https://api.example.com"}], "paths": {
  "/repos/{owner}/{repo}/issues": {
    "get": {"operationId": "issues/list-for-repo", "summary": "List repository issues", "tags": ["issues"]},
    "post": {"operationId": "issues/create", "summary": "Create an issue", "tags": ["issues"]}},
  "/repos/{owner}/{repo}/pulls": {
    "get": {"operationId": "pulls/list", "summary": "List pull requests", "tags": ["pulls"]}},
  "/user/repos": {
    "get": {"operationId": "repos/list-for-authenticated-user", "summary": "List repositories for the authenticated user", "tags": ["repos"]}},
  "/orders/{id}/exchanges": {
    "post": {"operationId": "createExchange", "summary": "Exchange an item", "description": "Swap an ordered item for another size."}}}}`

func names(tools []*Tool) []string {
	out := []string{}
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func TestSearch(t *testing.T) {
	c := load(t, []byte(searchDoc), nil)
	tests := []struct {
		query string
		limit int
		want  []string
	}{
		{"create issue", 2, []string{"issues_create", "issues_list-for-repo"}},
		{"pull requests", 5, []string{"pulls_list"}},
		{"exchange", 5, []string{"createExchange"}},
		{"swap size", 5, []string{"createExchange"}}, // from the description
		{"repositories", 2, []string{"repos_list-for-authenticated-user", "issues_list-for-repo"}},
		{"nothing matches zzz", 5, []string{}},
		{"", 2, []string{"createExchange", "issues_list-for-repo"}}, // catalog order
	}
	for _, tt := range tests {
		if got := names(c.Search(tt.query, tt.limit)); !cmp.Equal(got, tt.want) {
			t.Errorf("Search(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestSearchConcurrent(t *testing.T) {
	c := load(t, []byte(searchDoc), nil)
	done := make(chan []string)
	for range 8 {
		go func() { done <- names(c.Search("list", 3)) }()
	}
	first := <-done
	for range 7 {
		if got := <-done; !cmp.Equal(got, first) {
			t.Errorf("concurrent searches disagree: %v, %v", got, first)
		}
	}
}

func TestWords(t *testing.T) {
	got := words("getRepoContent repos/list-for-user HTTPServer")
	want := []string{"get", "repo", "content", "repo", "list", "for", "user", "httpserver"}
	if !cmp.Equal(got, want) {
		t.Errorf("words = %v, want %v", got, want)
	}
}

func TestMarshalBinaryRoundTrip(t *testing.T) {
	c := loadFile(t, "testdata/nasty/clashes.json", &Options{Prefix: "x_", Resource: "https://api.example.com/"})
	data, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalCatalog(data)
	if err != nil {
		t.Fatal(err)
	}
	opt := cmp.AllowUnexported(Tool{}, arg{}, bodySpec{})
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		s := p.String()
		return s == "byName" || s == "searchOnce" || s == "index"
	}, cmp.Ignore())
	if diff := cmp.Diff(c, back, opt, ignore, cmp.AllowUnexported(Catalog{})); diff != "" {
		t.Errorf("round trip differs (-want +got):\n%s", diff)
	}
	args := map[string]any{"path_order_id": "1", "body_order_id": "2", "quantity": 3.0, "query_note": "n"}
	r1, err1 := c.NewRequest(context.Background(), "x_updateOrder", args)
	r2, err2 := back.NewRequest(context.Background(), "x_updateOrder", args)
	if err1 != nil || err2 != nil || r1.URL.String() != r2.URL.String() {
		t.Errorf("requests differ: %v %v / %v %v", r1.URL, err1, r2.URL, err2)
	}
	if _, err := UnmarshalCatalog([]byte("garbage")); err == nil {
		t.Error("garbage decoded")
	}
	if _, err := UnmarshalCatalog(append([]byte(binaryMagic), "garbage"...)); err == nil {
		t.Error("garbage after the magic decoded")
	}
	// A catalog stored before patterns were made ECMA-262 (format v1) may
	// carry patterns clients refuse: it is not served, the caller translates again.
	blob, _ := c.MarshalBinary()
	v1 := append([]byte("poppy-openapi2tools catalog v1\n"), bytes.TrimPrefix(blob, []byte(binaryMagic))...)
	if _, err := UnmarshalCatalog(v1); err == nil {
		t.Error("a v1 catalog decoded")
	}
}
