package openapi2tools

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const requestsDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "Requests", "version": "1"},
  "servers": [{"url": "SERVER/v1"}],
  "paths": {
    "/items/{id}": {
      "get": {
        "operationId": "getItem",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
          {"name": "ids", "in": "query", "schema": {"type": "array", "items": {"type": "integer"}}},
          {"name": "tags", "in": "query", "explode": false, "schema": {"type": "array", "items": {"type": "string"}}},
          {"name": "filter", "in": "query", "style": "deepObject", "explode": true, "schema": {"type": "object"}},
          {"name": "color", "in": "query", "style": "spaceDelimited", "schema": {"type": "array"}},
          {"name": "sizes", "in": "query", "style": "pipeDelimited", "schema": {"type": "array"}},
          {"name": "point", "in": "query", "schema": {"type": "object"}},
          {"name": "flat", "in": "query", "explode": false, "schema": {"type": "object"}},
          {"name": "q", "in": "query", "schema": {"type": "string"}},
          {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
          {"name": "session", "in": "cookie", "schema": {"type": "string"}}
        ]
      }
    },
    "/styles/{label}/{matrix}/{list}": {
      "get": {
        "operationId": "styles",
        "parameters": [
          {"name": "label", "in": "path", "required": true, "style": "label", "explode": true, "schema": {"type": "array"}},
          {"name": "matrix", "in": "path", "required": true, "style": "matrix", "schema": {"type": "object"}},
          {"name": "list", "in": "path", "required": true, "schema": {"type": "array"}}
        ]
      }
    },
    "/orders/{order_id}": {
      "post": {
        "operationId": "updateOrder",
        "parameters": [{"name": "order_id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
          "type": "object", "required": ["quantity"],
          "properties": {"order_id": {"type": "string"}, "quantity": {"type": "integer"}, "items": {"type": "array"}}}}}}
      }
    },
    "/form": {
      "post": {
        "operationId": "form",
        "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {
          "type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"}, "meta": {"type": "object"}}}}}}
      }
    },
    "/upload": {
      "post": {
        "operationId": "upload",
        "requestBody": {"required": true, "content": {"multipart/form-data": {"schema": {
          "type": "object", "properties": {"file": {"type": "string", "format": "binary"}, "caption": {"type": "string"}}}}}}
      }
    },
    "/raw": {
      "put": {"operationId": "raw", "requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}}},
      "post": {"operationId": "list", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "array"}}}}}
    },
    "/loose-form": {"post": {"operationId": "looseForm", "requestBody": {"content": {"application/x-www-form-urlencoded": {}}}}},
    "/hop": {"get": {"operationId": "hop"}},
    "/away": {"get": {"operationId": "away"}}
  }
}`

// recorded is what the test server saw of one request.
type recorded struct {
	Method, RawPath, RawQuery, ContentType, Trace, Cookie, Auth string
	Body                                                        string
}

type testServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded // guarded by mu
}

func (s *testServer) last(t *testing.T) recorded {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		t.Fatal("the server received no request")
	}
	return s.requests[len(s.requests)-1]
}

// newTestServer serves requestsDoc's operations, records each request and
// redirects /hop to /items/1 and /away to redirectTo.
func newTestServer(t *testing.T, redirectTo string) *testServer {
	s := &testServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, recorded{Method: r.Method, RawPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			ContentType: r.Header.Get("Content-Type"), Trace: r.Header.Get("X-Trace"), Cookie: r.Header.Get("Cookie"),
			Auth: r.Header.Get("Authorization"), Body: string(body)})
		s.mu.Unlock()
		switch r.URL.Path {
		case "/v1/hop":
			http.Redirect(w, r, "/v1/items/1", http.StatusFound)
		case "/v1/away":
			http.Redirect(w, r, redirectTo, http.StatusFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{ "ok" : true }`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func requestsCatalog(t *testing.T, srv *testServer) *Catalog {
	t.Helper()
	c := load(t, []byte(strings.ReplaceAll(requestsDoc, "SERVER", srv.URL)), nil)
	checkCatalog(t, c, "")
	return c
}

func call(t *testing.T, c *Catalog, srv *testServer, name string, args map[string]any) recorded {
	t.Helper()
	res, err := c.Call(context.Background(), srv.Client(), name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.Status != 200 || res.Body != `{"ok":true}` {
		t.Fatalf("%s: result %+v", name, res)
	}
	return srv.last(t)
}

func TestArgumentsArriveWhereTheyBelong(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	got := call(t, c, srv, "getItem", map[string]any{
		"id":      "a/b c?",
		"ids":     []any{1.0, 2.0},
		"tags":    []any{"x y", "z"},
		"filter":  map[string]any{"state": "open", "n": 3.0},
		"color":   []any{"blue", "black"},
		"sizes":   []any{"s", "m"},
		"point":   map[string]any{"x": 1.0, "y": 2.0},
		"flat":    map[string]any{"k": "v"},
		"q":       "a&b=c",
		"X-Trace": "t-1",
		"session": "s1",
	})
	want := recorded{
		Method:   "GET",
		RawPath:  "/v1/items/a%2Fb%20c%3F",
		RawQuery: "ids=1&ids=2&tags=x%20y,z&filter%5Bn%5D=3&filter%5Bstate%5D=open&color=blue%20black&sizes=s|m&x=1&y=2&flat=k,v&q=a%26b%3Dc",
		Trace:    "t-1",
		Cookie:   "session=s1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestPathStyles(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	got := call(t, c, srv, "styles", map[string]any{
		"label": []any{"a", "b"}, "matrix": map[string]any{"r": 1.0, "g": 2.0}, "list": []any{"..", "x"}})
	if want := "/v1/styles/.a.b/;matrix=g,2,r,1/%2E%2E,x"; got.RawPath != want {
		t.Errorf("path %s, want %s", got.RawPath, want)
	}
	got = call(t, c, srv, "styles", map[string]any{"label": "..", "matrix": "m", "list": ".."})
	if want := "/v1/styles/.%2E%2E/;matrix=m/%2E%2E"; got.RawPath != want {
		t.Errorf("dot segments: path %s, want %s", got.RawPath, want)
	}
}

func TestClashingOrderIDRoutedToPathAndBody(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	got := call(t, c, srv, "updateOrder", map[string]any{
		"path_order_id": "ord_7", "body_order_id": "ord_body", "quantity": 2.0, "items": []any{"a"}})
	if got.RawPath != "/v1/orders/ord_7" || got.ContentType != "application/json" ||
		got.Body != `{"items":["a"],"order_id":"ord_body","quantity":2}` {
		t.Errorf("request %+v", got)
	}
	if got.Auth != "" {
		t.Errorf("openapi2tools set Authorization %q", got.Auth)
	}
}

func TestFormAndMultipartBodies(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	got := call(t, c, srv, "form", map[string]any{"name": "a b&c", "tags": []any{"x", "y"}, "meta": map[string]any{"k": 1.0}})
	if got.ContentType != "application/x-www-form-urlencoded" || got.Body != "meta=%7B%22k%22%3A1%7D&name=a+b%26c&tags=x&tags=y" {
		t.Errorf("form request %+v", got)
	}
	got = call(t, c, srv, "upload", map[string]any{"file": "hello file", "caption": "hi"})
	mt, params, err := mime.ParseMediaType(got.ContentType)
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("content type %q: %v", got.ContentType, err)
	}
	r := multipart.NewReader(strings.NewReader(got.Body), params["boundary"])
	parts := map[string]string{}
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		parts[p.FormName()+"|"+p.FileName()] = string(b)
	}
	if want := map[string]string{"caption|": "hi", "file|file": "hello file"}; !cmp.Equal(parts, want) {
		t.Errorf("multipart parts %v, want %v", parts, want)
	}
}

func TestWholeBodies(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	if got := call(t, c, srv, "raw", map[string]any{"body": "plain text"}); got.Body != "plain text" || got.ContentType != "text/plain" {
		t.Errorf("text body %+v", got)
	}
	if got := call(t, c, srv, "list", map[string]any{"body": []any{1.0, "two"}}); got.Body != `[1,"two"]` {
		t.Errorf("array body %+v", got)
	}
	got := call(t, c, srv, "looseForm", map[string]any{"body": map[string]any{"b": "2", "a": []any{"x", "y"}}})
	if got.Body != "a=x&a=y&b=2" || got.ContentType != "application/x-www-form-urlencoded" {
		t.Errorf("form body without a schema %+v", got)
	}
	// An optional body with no arguments is not sent.
	if got := call(t, c, srv, "raw", nil); got.Body != "" || got.ContentType != "" {
		t.Errorf("empty optional body %+v", got)
	}
}

func TestRequestBodyCanBeResent(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	req, err := c.NewRequest(context.Background(), "updateOrder", map[string]any{"path_order_id": "1", "quantity": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody == nil {
		t.Fatal("no GetBody: the DPoP client could not resend after a nonce challenge")
	}
	b, _ := req.GetBody()
	data, _ := io.ReadAll(b)
	if string(data) != `{"quantity":1}` {
		t.Errorf("body %s", data)
	}
}

func TestArgumentErrors(t *testing.T) {
	srv := newTestServer(t, "")
	c := requestsCatalog(t, srv)
	ctx := context.Background()
	_, err := c.NewRequest(ctx, "updateOrder", map[string]any{"order_id": "1", "quantity": 1.0})
	if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "unknown arguments order_id; valid arguments are body_order_id, items, path_order_id, quantity") {
		t.Errorf("unknown argument: %v", err)
	}
	_, err = c.NewRequest(ctx, "updateOrder", map[string]any{"body_order_id": "1"})
	if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "missing required arguments path_order_id, quantity") {
		t.Errorf("missing arguments: %v", err)
	}
	if _, err = c.NewRequest(ctx, "nope", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
	_, err = c.NewRequest(ctx, "getItem", map[string]any{"id": "1", "X-Trace": "a\r\nInjected: 1"})
	if !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("header injection: %v", err)
	}
}

func TestForeignHostsRefused(t *testing.T) {
	foreign := newTestServer(t, "")
	srv := newTestServer(t, foreign.URL+"/v1/items/1")
	c := requestsCatalog(t, srv)
	// Trust both servers, so only the host guard can stop the redirect.
	client := srv.Client()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	pool.AddCert(foreign.Certificate())
	client.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool

	if _, err := c.Call(context.Background(), client, "hop", nil, nil); err != nil {
		t.Errorf("a redirect on the same host was refused: %v", err)
	}
	_, err := c.Call(context.Background(), client, "away", nil, nil)
	if !errors.Is(err, ErrForeignHost) {
		t.Errorf("redirect to a foreign host: err %v, want ErrForeignHost", err)
	}
	foreign.mu.Lock()
	n := len(foreign.requests)
	foreign.mu.Unlock()
	if n != 0 {
		t.Errorf("the foreign host received %d requests", n)
	}

	// A path that would move the host ("https://host@evil.example/steal").
	doc := `{"openapi":"3.1.0","servers":[{"url":"https://api.example.com"}],"paths":{"@evil.example/steal":{"get":{"operationId":"steal"}},".evil.example/x":{"get":{"operationId":"suffix"}}}}`
	c2 := load(t, []byte(doc), nil)
	for _, name := range []string{"steal", "suffix"} {
		if _, err := c2.NewRequest(context.Background(), name, nil); !errors.Is(err, ErrForeignHost) {
			t.Errorf("%s: err %v, want ErrForeignHost", name, err)
		}
	}
	// Plain HTTP is never used.
	plain := `{"openapi":"3.1.0","servers":[{"url":"http://api.example.com"}],"paths":{"/a":{"get":{"operationId":"a"}}}}`
	if _, err := load(t, []byte(plain), nil).NewRequest(context.Background(), "a", nil); !errors.Is(err, ErrForeignHost) {
		t.Errorf("http server: err %v, want ErrForeignHost", err)
	}
}

func TestRetryReachesServerAgain(t *testing.T) {
	// The request NewRequest builds can be sent twice (as the DPoP client
	// does after use_dpop_nonce); the server sees the body both times.
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"quantity":1}` {
			t.Errorf("attempt %d body %q", hits.Load()+1, b)
		}
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	c := load(t, []byte(strings.ReplaceAll(requestsDoc, "SERVER", srv.URL)), nil)
	client := srv.Client()
	client.Transport = retryOnce{client.Transport}
	res, err := c.Call(context.Background(), client, "updateOrder", map[string]any{"path_order_id": "1", "quantity": 1.0}, nil)
	if err != nil || res.Status != 200 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if hits.Load() != 2 {
		t.Errorf("server saw %d requests, want 2", hits.Load())
	}
}

// retryOnce resends a request once after a 401, rewinding the body with
// GetBody, as a DPoP nonce retry does.
type retryOnce struct{ next http.RoundTripper }

func (r retryOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	resp.Body.Close()
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return r.next.RoundTrip(again)
}
