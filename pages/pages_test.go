package pages

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func newServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestOneTimePage(t *testing.T) {
	s := newServer(t)
	if !strings.HasPrefix(s.BaseURL(), "http://127.0.0.1:") {
		t.Fatalf("base %q is not loopback", s.BaseURL())
	}
	u, _ := s.Open(func(w http.ResponseWriter, r *http.Request, done func()) {
		done()
		io.WriteString(w, "hello")
	}, 0)
	token := u[strings.LastIndex(u, "/")+1:]
	if len(token) < 43 {
		t.Errorf("token %q is shorter than 256 bits", token)
	}
	resp, body := get(t, u)
	if resp.StatusCode != 200 || body != "hello" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("first visit: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ := get(t, u); resp.StatusCode != http.StatusGone {
		t.Errorf("second visit: %d, want 410", resp.StatusCode)
	}
}

func TestPageExpires(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	s.now = func() time.Time { return now }
	u, _ := s.Open(func(w http.ResponseWriter, r *http.Request, done func()) { io.WriteString(w, "ok") }, time.Minute)
	if resp, _ := get(t, u); resp.StatusCode != 200 {
		t.Fatalf("fresh page: %d", resp.StatusCode)
	}
	now = now.Add(61 * time.Second)
	if resp, _ := get(t, u); resp.StatusCode != http.StatusGone {
		t.Errorf("expired page: %d, want 410", resp.StatusCode)
	}
}

func TestPageRefusals(t *testing.T) {
	s := newServer(t)
	u, cancel := s.Open(func(w http.ResponseWriter, r *http.Request, done func()) { io.WriteString(w, "ok") }, 0)
	if resp, _ := get(t, s.BaseURL()+"/p/guess"); resp.StatusCode != http.StatusGone {
		t.Errorf("unknown token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(url.Values{"a": {"b"}}.Encode()))
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
	}
	cancel()
	if resp, _ := get(t, u); resp.StatusCode != http.StatusGone {
		t.Errorf("cancelled page: %d", resp.StatusCode)
	}
}

func TestRebindingRefused(t *testing.T) {
	s := newServer(t)
	u, _ := s.Open(func(w http.ResponseWriter, r *http.Request, done func()) { io.WriteString(w, "ok") }, 0)
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d, want 421", resp.StatusCode)
	}
}

// TestPublicOrigin: a form post under PublicURL is checked against the
// public origin.
func TestPublicOrigin(t *testing.T) {
	s, err := New(&Options{PublicURL: "https://agent.example/pages", Gate: admitAll{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	u, _ := s.OpenForUser("", func(w http.ResponseWriter, r *http.Request, done func()) { io.WriteString(w, "ok") }, 0)
	if !strings.HasPrefix(u, "https://agent.example/pages/p/") {
		t.Fatalf("url %q", u)
	}
	post := func(origin string) int {
		req := httptest.NewRequest(http.MethodPost, u, nil)
		req.Header.Set("Origin", origin)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post("https://agent.example"); code != http.StatusOK {
		t.Errorf("a post from the public origin: %d", code)
	}
	if code := post("https://evil.example"); code != http.StatusForbidden {
		t.Errorf("a cross-site post: %d", code)
	}
	if _, err := New(&Options{PublicURL: "agent.example/pages"}); err == nil {
		t.Error("a PublicURL without a scheme was accepted")
	}
}

// admitAll is a Gate that admits everyone, for tests of what lies behind it.
type admitAll struct{}

func (admitAll) Admit(http.ResponseWriter, *http.Request, string) bool { return true }
