package poppytest_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func TestDiscoveryDocuments(t *testing.T) {
	s, rt := newRecorded(t, nil)
	for _, host := range []string{"example.com", "www.example.com"} {
		doc := getJSON(t, s, s.URL(host, "/.well-known/poppy.json"))
		org := doc["organization"].(map[string]any)
		auth := doc["auth"].(map[string]any)
		if org["domain"] != "example.com" || auth["issuer"] != "https://auth.example.com" {
			t.Errorf("%s poppy.json: organization %v, auth.issuer %v", host, org, auth["issuer"])
		}
		for _, k := range []string{"direct", "device", "mediated", "custom_scopes"} {
			if auth[k] == nil {
				t.Errorf("%s poppy.json: auth.%s missing", host, k)
			}
		}
		var urls []string
		for _, a := range doc["apis"].([]any) {
			urls = append(urls, a.(map[string]any)["url"].(string))
		}
		want := []string{"https://api.example.com/openapi.json", "https://mcp.example.com/mcp"}
		if diff := cmp.Diff(want, urls); diff != "" {
			t.Errorf("%s poppy.json apis (-want +got):\n%s", host, diff)
		}
	}
	md := getJSON(t, s, "https://auth.example.com/.well-known/oauth-authorization-server")
	for k, want := range map[string]any{
		"issuer":                                "https://auth.example.com",
		"token_endpoint":                        "https://auth.example.com/oauth/token",
		"revocation_endpoint":                   "https://auth.example.com/oauth/revoke",
		"authorization_endpoint":                "https://auth.example.com/oauth/authorize",
		"device_authorization_endpoint":         "https://auth.example.com/oauth/device",
		"poppy_domains":                         []any{"example.com"},
		"dpop_signing_alg_values_supported":     []any{"ES256"},
		"token_endpoint_auth_methods_supported": []any{"private_key_jwt"},
	} {
		if diff := cmp.Diff(want, md[k]); diff != "" {
			t.Errorf("metadata %s (-want +got):\n%s", k, diff)
		}
	}
	rmd := getJSON(t, s, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
	wantRMD := map[string]any{"resource": "https://mcp.example.com/mcp",
		"authorization_servers": []any{"https://auth.example.com"}, "bearer_methods_supported": []any{"header"}}
	if diff := cmp.Diff(wantRMD, rmd); diff != "" {
		t.Errorf("resource metadata (-want +got):\n%s", diff)
	}
	wantNoViolation(t, s, rt)
}

func TestConditionalGet(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	u := s.URL("example.com", "/.well-known/poppy.json")
	status, h, body := get(t, s, u, nil)
	etag := h.Get("ETag")
	if status != 200 || etag == "" || h.Get("Cache-Control") != "max-age=300" {
		t.Fatalf("first GET: %d, ETag %q, Cache-Control %q", status, etag, h.Get("Cache-Control"))
	}
	for inm, want := range map[string]int{etag: 304, "W/" + etag: 304, `"x", ` + etag: 304, "*": 304, `"other"`: 200} {
		status, h, b := get(t, s, u, http.Header{"If-None-Match": {inm}})
		if status != want {
			t.Errorf("If-None-Match %s: status %d, want %d", inm, status, want)
		}
		if want == 304 && (len(b) != 0 || h.Get("ETag") != etag) {
			t.Errorf("If-None-Match %s: 304 with body %q, ETag %q", inm, b, h.Get("ETag"))
		}
		if want == 200 && !bytes.Equal(b, body) {
			t.Errorf("If-None-Match %s: body changed", inm)
		}
	}
}

func TestMutatorsAndDomain(t *testing.T) {
	s := poppytest.NewServer(t, &poppytest.Options{
		Domain:       "shop.test",
		CacheControl: "no-cache",
		PoppyJSON:    func(doc map[string]any) { delete(doc, "auth") },
		Metadata:     func(md map[string]any) { md["poppy_domains"] = []any{"other.test"} },
		ResourceMetadata: func(md map[string]any) {
			md["authorization_servers"] = []any{"https://evil.test"}
		},
	})
	if s.Issuer() != "https://auth.shop.test" || s.Domain() != "shop.test" {
		t.Fatalf("Issuer %q, Domain %q", s.Issuer(), s.Domain())
	}
	_, h, _ := get(t, s, s.URL("shop.test", "/.well-known/poppy.json"), nil)
	if h.Get("Cache-Control") != "no-cache" {
		t.Errorf("Cache-Control %q, want no-cache", h.Get("Cache-Control"))
	}
	if doc := getJSON(t, s, s.URL("www.shop.test", "/.well-known/poppy.json")); doc["auth"] != nil {
		t.Errorf("auth not removed: %v", doc["auth"])
	}
	if md := getJSON(t, s, s.URL("auth.shop.test", "/.well-known/oauth-authorization-server")); md["issuer"] != "https://auth.shop.test" || md["poppy_domains"].([]any)[0] != "other.test" {
		t.Errorf("metadata not mutated: %v", md)
	}
	rmd := getJSON(t, s, s.URL("mcp.shop.test", "/.well-known/oauth-protected-resource/mcp"))
	if rmd["authorization_servers"].([]any)[0] != "https://evil.test" {
		t.Errorf("resource metadata not mutated: %v", rmd)
	}
}

func TestSetDocument(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	u := s.URL("example.com", "/.well-known/poppy.json")
	s.SetDocument("example.com", "/.well-known/poppy.json", 200, http.Header{"Content-Type": {"text/html"}}, []byte("<html>shop</html>"))
	status, h, body := get(t, s, u, nil)
	if status != 200 || h.Get("Content-Type") != "text/html" || string(body) != "<html>shop</html>" || h.Get("ETag") == "" {
		t.Errorf("soft 404: %d %q %q ETag %q", status, h.Get("Content-Type"), body, h.Get("ETag"))
	}
	if status, _, _ := get(t, s, u, http.Header{"If-None-Match": {h.Get("ETag")}}); status != 304 {
		t.Errorf("conditional GET of a set document: %d, want 304", status)
	}
	if want := "https://www.example.com/.well-known/poppy.json"; getJSON(t, s, want) == nil {
		t.Errorf("www document changed too")
	}

	s.SetDocument("example.com", "/.well-known/poppy.json", http.StatusFound, http.Header{"Location": {"http://example.com/p.json"}}, nil)
	c := *s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://example.com/p.json" {
		t.Errorf("redirect: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	s.SetDocument("api.example.com", "/new.json", 200, nil, []byte("{}"))
	resp, err = s.Client().Post(s.URL("api.example.com", "/new.json"), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to a document: %d, want 405", resp.StatusCode)
	}
}

func TestRoutingByHostAnyPort(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	if status, _, _ := get(t, s, "https://api.example.com:8443/.well-known/poppy.json", nil); status != 404 {
		t.Errorf("api host, any port: %d, want 404 (poppy.json is on example.com only)", status)
	}
	if status, _, _ := get(t, s, "https://example.com:9/.well-known/poppy.json", nil); status != 200 {
		t.Errorf("port 9: %d, want 200", status)
	}
	if status, _, _ := get(t, s, "https://unknown.example.com/", nil); status != http.StatusMisdirectedRequest {
		t.Errorf("unknown host: %d, want 421", status)
	}
	if _, err := s.Client().Get("https://evil.test/"); err == nil || !strings.Contains(err.Error(), "does not dial") {
		t.Errorf("host outside the certificate: err %v, want a dial refusal", err)
	}
	want := []string{"example.com", "www.example.com", "auth.example.com", "api.example.com", "mcp.example.com", "agent.example"}
	if diff := cmp.Diff(want, s.Hosts()); diff != "" {
		t.Errorf("Hosts (-want +got):\n%s", diff)
	}
}

func TestHandleOverridesAndAddsHosts(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	say := func(text string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, text) }
	}
	s.Handle("api.example.com", "GET /hello", say("one"))
	s.Handle("API.example.com", "GET /hello", say("two"))
	if _, _, b := get(t, s, s.URL("api.example.com", "/hello"), nil); string(b) != "two" {
		t.Errorf("override: got %q, want two", b)
	}
	s.Handle("shop.example.com", "/", say("shop"))
	if _, _, b := get(t, s, s.URL("shop.example.com", "/x"), nil); string(b) != "shop" {
		t.Errorf("new host: got %q", b)
	}
	if !slices.Contains(s.Hosts(), "shop.example.com") {
		t.Errorf("Hosts %v lacks shop.example.com", s.Hosts())
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Handle on a host outside the certificate did not panic")
		}
	}()
	s.Handle("evil.test", "/", say("x"))
}

func TestRequestsAreRecorded(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	var got int
	s.HandleFunc("api.example.com", "POST /upload", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = len(b)
	})
	big := bytes.Repeat([]byte("a"), 1<<20+10)
	resp, err := s.Client().Post(s.URL("api.example.com", "/upload?x=1"), "text/plain", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != len(big) {
		t.Errorf("handler read %d bytes, want %d", got, len(big))
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Host != "api.example.com" || r.Method != "POST" || r.Path != "/upload" || r.RawQuery != "x=1" ||
		len(r.Body) != 1<<20 || r.Header.Get("Content-Type") != "text/plain" || r.Time.IsZero() {
		t.Errorf("recorded %s %s %s ?%s, %d body bytes, header %v", r.Method, r.Host, r.Path, r.RawQuery, len(r.Body), r.Header)
	}
	reqs[0].Body[0] = 'b'
	if s.Requests()[0].Body[0] != 'a' {
		t.Errorf("Requests does not return a copy")
	}
	if n := s.Count("api.example.com:443", "/upload"); n != 1 {
		t.Errorf("Count = %d, want 1", n)
	}
	if n := s.Count("example.com", "/upload"); n != 0 {
		t.Errorf("Count on another host = %d, want 0", n)
	}
}

func TestTokenInURLIsAViolation(t *testing.T) {
	const jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"
	for _, tc := range []struct{ name, url, want string }{
		{"access_token", "https://api.example.com/orders?access_token=abc", "query parameter access_token"},
		{"assertion", "https://example.com/poppy/browser-session?assertion=abc", "query parameter assertion"},
		{"jwt in query", "https://api.example.com/orders?q=" + jwt, "a JWT"},
		{"jwt in path", "https://api.example.com/orders/" + jwt, "a JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt := newRecorded(t, nil)
			get(t, s, tc.url, nil)
			wantViolation(t, s, rt, "agent violated Poppy 0.1 §4.3", tc.want)
		})
	}
	t.Run("clean and agent host", func(t *testing.T) {
		s, rt := newRecorded(t, nil)
		get(t, s, "https://api.example.com/orders?state=xyz&scope=poppy%3Aread", nil)
		get(t, s, "https://agent.example/oauth/callback?code=abc&assertion="+jwt, nil)
		wantNoViolation(t, s, rt)
	})
}

func TestSetAgentDocuments(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	s.SetAgentDocuments([]byte(`{"client_id":"https://agent.example/a/agent.json","jwks_uri":"https://agent.example/a/keys"}`), []byte(`{"keys":[]}`))
	if _, _, b := get(t, s, "https://agent.example/a/keys", nil); string(b) != `{"keys":[]}` {
		t.Errorf("jwks at jwks_uri path: %q", b)
	}
	getJSON(t, s, "https://agent.example/a/agent.json")
	s.SetAgentDocuments([]byte(`{"client_id":"https://elsewhere.example/agent.json"}`), []byte(`{"keys":[1]}`))
	if status, _, _ := get(t, s, "https://agent.example/a/keys", nil); status != 404 {
		t.Errorf("old jwks path still served: %d", status)
	}
	if _, _, b := get(t, s, "https://agent.example/jwks.json", nil); string(b) != `{"keys":[1]}` {
		t.Errorf("jwks at default path: %q", b)
	}
	getJSON(t, s, "https://agent.example/agent.json")
}

func TestCertificateAndCA(t *testing.T) {
	s := poppytest.NewServer(t, nil)
	block, _ := pem.Decode(s.CAPEM())
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("CAPEM is not a PEM certificate")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("CA: %v, IsCA %v", err, ca != nil && ca.IsCA)
	}
	// A plain TLS client that trusts only CertPool must accept every host.
	for _, host := range []string{"example.com", "mcp.example.com", "agent.example", "x.agent.example"} {
		conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: s.CertPool(), ServerName: host})
		if err != nil {
			t.Errorf("TLS to %s: %v", host, err)
			continue
		}
		conn.Close()
	}
	// And a client with the system roots must refuse it.
	_, err = tls.Dial("tcp", s.Addr(), &tls.Config{ServerName: "example.com"})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("system roots: err %v, want UnknownAuthorityError", err)
	}
	if host, _, err := net.SplitHostPort(s.Addr()); err != nil || host != "127.0.0.1" {
		t.Errorf("Addr %q, want 127.0.0.1:PORT", s.Addr())
	}
}

func TestUnstartedAndClose(t *testing.T) {
	s := poppytest.NewUnstartedServer(t, nil)
	if s.Addr() != "" {
		t.Errorf("Addr before Start = %q", s.Addr())
	}
	if _, err := s.Client().Get(s.URL("example.com", "/")); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("GET before Start: %v", err)
	}
	s.HandleFunc("example.com", "GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "home") })
	s.Start()
	if _, _, b := get(t, s, s.URL("example.com", "/"), nil); string(b) != "home" {
		t.Errorf("handler added before Start: %q", b)
	}
	s.Close()
	s.Close()
	if _, err := s.Client().Get(s.URL("example.com", "/")); err == nil {
		t.Errorf("GET after Close succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Start after Close did not panic")
		}
	}()
	s.Start()
}
