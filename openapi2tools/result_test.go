package openapi2tools

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

const listDoc = `{"openapi": "3.1.0", "servers": [{"url": "SERVER"}], "paths": {"/list": {"get": {"operationId": "list",
  "parameters": [{"name": "per_page", "in": "query", "schema": {"type": "integer"}},
                 {"name": "q", "in": "query", "schema": {"type": "string"}},
                 {"name": "sort", "in": "query", "schema": {"type": "string"}}]}}}}`

// serve answers every request with the given content type and body.
func serve(t *testing.T, contentType string, body []byte) (*Catalog, *http.Client) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return load(t, []byte(strings.ReplaceAll(listDoc, "SERVER", srv.URL)), nil), srv.Client()
}

func TestResultJSONCompacted(t *testing.T) {
	c, client := serve(t, "application/json; charset=utf-8", []byte("{\n  \"a\": [1, 2],\n  \"b\": \"x\"\n}\n"))
	res, err := c.Call(context.Background(), client, "list", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Body != `{"a":[1,2],"b":"x"}` || res.Truncated || res.Note != "" || res.Status != 200 {
		t.Errorf("result %+v", res)
	}
}

func TestResultCutWithNarrowingNote(t *testing.T) {
	big := "[" + strings.Repeat(`{"name":"é-item"},`, 3000) + `{"name":"last"}]`
	c, client := serve(t, "application/json", []byte(big))
	res, err := c.Call(context.Background(), client, "list", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Body) > defaultMaxBody || !utf8.ValidString(res.Body) {
		t.Errorf("truncated %v, %d bytes, valid UTF-8 %v", res.Truncated, len(res.Body), utf8.ValidString(res.Body))
	}
	want := "body cut at 16384 of 57017 bytes; narrow the call with per_page, q"
	if res.Note != want {
		t.Errorf("note %q, want %q", res.Note, want)
	}
}

func TestResultBinarySummarised(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000)...)
	for _, ct := range []string{"image/png", ""} {
		c, client := serve(t, ct, png)
		res, err := c.Call(context.Background(), client, "list", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Body != "" || res.Note != "binary body (image/png, 4008 bytes) not shown" {
			t.Errorf("content type %q: result %+v", ct, res)
		}
	}
}

func TestResultReadLimit(t *testing.T) {
	c, client := serve(t, "text/plain", bytes.Repeat([]byte("x"), 5000))
	res, err := c.Call(context.Background(), client, "list", nil, &ResultOptions{ReadLimit: 1000, MaxBody: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Body) != 100 || !res.Truncated || res.Note != "body cut at 100 of more than 1000 bytes; narrow the call with per_page, q" {
		t.Errorf("result %d bytes, %+v", len(res.Body), res.Note)
	}
}

func TestResultReadLimitSplitsNoCharacter(t *testing.T) {
	c, client := serve(t, "text/plain; charset=utf-8", bytes.Repeat([]byte("é"), 1000))
	res, err := c.Call(context.Background(), client, "list", nil, &ResultOptions{ReadLimit: 101, MaxBody: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Body != strings.Repeat("é", 50) || !res.Truncated {
		t.Errorf("result %q, %+v", res.Body, res.Note)
	}
}

func TestResultErrorStatusIsAResult(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"title": "not found"}`)
	}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
	res, err := Do(context.Background(), srv.Client(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 404 || res.Body != `{"title":"not found"}` || res.ContentType != "application/problem+json" {
		t.Errorf("result %+v", res)
	}
}

func TestDoNeedsAClient(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://api.example.com/x", nil)
	if _, err := Do(context.Background(), nil, req, nil); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("nil client: err %v, want ErrInvalidArguments", err)
	}
}

func TestBodyKind(t *testing.T) {
	tests := []struct {
		ct, body, want string
	}{
		{"application/json", `{}`, "json"},
		{"application/vnd.github+json", `{}`, "json"},
		{"text/html; charset=utf-8", "<p>", "text"},
		{"application/xml", "<a/>", "text"},
		{"", "plain words", "text"},
		{"application/octet-stream", "abc", "binary"},
		{"text/plain", "a\x00b", "binary"},
		{"application/json", "\xff\xfe", "binary"},
		{"bogus/;;", "x", "binary"},
	}
	for _, tt := range tests {
		if got := bodyKind(tt.ct, []byte(tt.body)); got != tt.want {
			t.Errorf("bodyKind(%q, %q) = %s, want %s", tt.ct, tt.body, got, tt.want)
		}
	}
}
