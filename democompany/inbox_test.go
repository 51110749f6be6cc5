package democompany_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/democompany"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestInboxShowsCodes: Inbox lists each one-time code Mediated Sign-In
// sent, with its account and where it went, waiting until used, on a page
// no cache keeps.
func TestInboxShowsCodes(t *testing.T) {
	srv := poppytest.NewServer(t, nil)
	inbox := democompany.Inbox(srv, poppytest.DefaultAccounts())
	page := func() (string, http.Header) {
		w := httptest.NewRecorder()
		inbox.ServeHTTP(w, httptest.NewRequest(http.MethodGet, democompany.InboxPath, nil))
		return w.Body.String(), w.Header()
	}
	if body, _ := page(); !strings.Contains(body, `id="empty"`) {
		t.Errorf("an inbox before any code: %s", body)
	}
	a := newAgent(t, srv)
	ctx := context.Background()
	step, err := a.sess.SignInMediated(ctx, []string{"poppy:read"},
		map[string]auth.Secret{"email": auth.NewSecret("sam@example.com"), "password": auth.NewSecret("sam-secret-42")})
	if err != nil || step.Status != auth.MediatedCodeRequired {
		t.Fatalf("mediated sign-in: %+v %v", step, err)
	}
	codes := srv.SentCodes()
	if len(codes) != 1 {
		t.Fatalf("codes sent: %v", codes)
	}
	body, h := page()
	for _, want := range []string{codes[0].Code, "sam@example.com", "Text to the phone number ending in 71", "waiting"} {
		if !strings.Contains(body, want) {
			t.Errorf("the inbox lacks %q:\n%s", want, body)
		}
	}
	if h.Get("Cache-Control") != "no-store" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("headers %v", h)
	}
	if done, err := a.sess.SubmitCode(ctx, step, auth.NewSecret(codes[0].Code)); err != nil || done.Status != auth.MediatedComplete {
		t.Fatalf("submitting the code: %+v %v", done, err)
	}
	if body, _ := page(); !strings.Contains(body, "finished") || strings.Contains(body, "waiting") {
		t.Errorf("a used code is still waiting:\n%s", body)
	}
	w := httptest.NewRecorder()
	inbox.ServeHTTP(w, httptest.NewRequest(http.MethodPost, democompany.InboxPath, nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST to the inbox: %d", w.Code)
	}
	wantNoViolation(t, srv)
}

// TestLoopbackOnly: the inbox answers only under its own address or
// localhost at its port, not under a name rebound to it, and sends other
// paths to itself.
func TestLoopbackOnly(t *testing.T) {
	h := democompany.LoopbackOnly("127.0.0.1:4321", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, c := range []struct {
		host, path string
		want       int
	}{
		{"127.0.0.1:4321", democompany.InboxPath, http.StatusTeapot},
		{"localhost:4321", democompany.InboxPath, http.StatusTeapot},
		{"127.0.0.1:4321", "/", http.StatusSeeOther},
		{"attacker.example:80", democompany.InboxPath, http.StatusMisdirectedRequest},
		{"localhost:80", democompany.InboxPath, http.StatusMisdirectedRequest},
	} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s%s: %d, want %d", c.host, c.path, w.Code, c.want)
		}
	}
}
