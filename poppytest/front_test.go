package poppytest_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// newFront starts a Front closed when t ends.
func newFront(t *testing.T) *poppytest.Front {
	t.Helper()
	f, err := poppytest.NewFront(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// frontClient reaches every name at the Front, trusting only its CA, as a
// client given SSL_CERT_FILE and --resolve would.
func frontClient(f *poppytest.Front) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, f.Addr())
		},
		TLSClientConfig: &tls.Config{RootCAs: f.CertPool()},
	}}
}

func getStatus(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFrontSharesListenerAndCA: two Companies on one Front answer on one
// address under one CA, each for its own domain with a certificate of its
// own; a third that wants a domain already served cannot start; a closed
// one gives its hosts back (421) while the other goes on.
func TestFrontSharesListenerAndCA(t *testing.T) {
	f := newFront(t)
	a := poppytest.NewServer(t, &poppytest.Options{Front: f})
	b := poppytest.NewServer(t, &poppytest.Options{Front: f, Domain: "b.test", AgentHost: "agent.b.test"})
	if a.Addr() != f.Addr() || b.Addr() != f.Addr() || string(a.CAPEM()) != string(f.CAPEM()) || string(b.CAPEM()) != string(f.CAPEM()) {
		t.Fatalf("addresses %s %s, front %s; the CAs differ", a.Addr(), b.Addr(), f.Addr())
	}
	c := frontClient(f)
	for _, d := range []string{"example.com", "b.test"} {
		status, body := getStatus(t, c, "https://auth."+d+"/.well-known/oauth-authorization-server")
		if status != 200 || !strings.Contains(body, `"issuer": "https://auth.`+d+`"`) {
			t.Errorf("%s: %d %s", d, status, body)
		}
	}
	if !f.Serves("mcp.b.test") || f.Serves("agent.b.test") {
		t.Errorf("front hosts %v: want b's, without its agent host, which serves nothing", f.Hosts())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Company for example.com started")
			}
		}()
		poppytest.NewServer(t, &poppytest.Options{Front: f, AgentHost: "agent.c.test"})
	}()
	a.Close()
	if status, _ := getStatus(t, c, "https://example.com/.well-known/poppy.json"); status != http.StatusMisdirectedRequest && status != 0 {
		t.Errorf("closed Company: %d, want 421 or a failed handshake", status)
	}
	if status, _ := getStatus(t, c, "https://b.test/.well-known/poppy.json"); status != 200 {
		t.Errorf("the other Company after the first closed: %d", status)
	}
	poppytest.NewServer(t, &poppytest.Options{Front: f}) // example.com is free again
}

// TestFrontCloseEndsRequests: closing one Server on a shared Front ends its
// requests in flight (here a body sent a byte a second), so Close returns.
func TestFrontCloseEndsRequests(t *testing.T) {
	f := newFront(t)
	s := poppytest.NewServer(t, &poppytest.Options{Front: f})
	s.SlowBody("example.com", "/.well-known/poppy.json", time.Second)
	resp, err := frontClient(f).Get("https://example.com/.well-known/poppy.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for a slow body")
	}
	if b, err := io.ReadAll(resp.Body); err == nil && len(b) > 100 {
		t.Errorf("the slow body went on after Close: %d bytes", len(b))
	}
}

// TestFrontAgentHost: Servers on one Front share an agent's host that none
// serves; once one serves documents there it is that Server's, and the
// other cannot take it.
func TestFrontAgentHost(t *testing.T) {
	f := newFront(t)
	a := poppytest.NewServer(t, &poppytest.Options{Front: f})
	b := poppytest.NewServer(t, &poppytest.Options{Front: f, Domain: "b.test"})
	a.SetAgentDocuments([]byte(`{"client_id":"https://agent.example/agent.json"}`), []byte(`{"keys":[]}`))
	if !f.Serves("agent.example") {
		t.Fatal("the agent host was not taken with its documents")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Server took the agent host")
		}
	}()
	b.SetAgentDocuments([]byte(`{}`), []byte(`{}`))
}

// TestClientIDBinding: a Company bound to one agent refuses another with
// invalid_client, without counting it as that agent's violation.
func TestClientIDBinding(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, &poppytest.Options{ClientID: "https://other.example/agent.json"})
	r := a.postToken(a.grantForm(nil), a.proof("POST", testTokenURL, "", "", nil))
	if r.status != 401 || r.str("error") != "invalid_client" || !strings.Contains(r.str("error_description"), "serves only the agent https://other.example/agent.json") {
		t.Errorf("answer %d %v, want 401 invalid_client", r.status, r.body)
	}
	wantNoViolation(t, s, rt)
}

// TestAgentClient: with Options.AgentClient, the agent's documents come from
// where it publishes them (here a server of its own), not from the Server.
func TestAgentClient(t *testing.T) {
	signKey := newKey(t)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &signKey.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	var fetched atomic.Int32
	own := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/jwks.json" {
			w.Write(jwks)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"client_id": testClientID, "jwks_uri": "https://agent.example/jwks.json",
			"redirect_uris": []string{"https://agent.example/cb"}, "token_endpoint_auth_method": "private_key_jwt"})
	}))
	defer own.Close()
	tr := own.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.ServerName = "example.com" // a name httptest's certificate covers
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, own.Listener.Addr().String())
	}
	c := newClock()
	s, rt := newRecorded(t, &poppytest.Options{Now: c.Now, AgentClient: &http.Client{Transport: tr}})
	a := &rawAgent{t: t, s: s, now: c.Now, signKey: signKey, dpopKey: newKey(t), userID: "usr_Q7c1vK"}
	a.startSession()
	if fetched.Load() != 2 || s.Count("agent.example", "/agent.json") != 0 {
		t.Errorf("the agent's own server was asked %d times, the Company %d times", fetched.Load(), s.Count("agent.example", "/agent.json"))
	}
	wantNoViolation(t, s, rt)
}
