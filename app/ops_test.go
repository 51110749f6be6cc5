package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
)

const notReadyIssuer = "unavailable: the authorization server's keys are not current\n"

// TestReadyWhenTheStoreFails: /readyz answers 503 with the one line that
// says what failed, and nothing of why, when the store does not answer;
// /healthz, the liveness probe, still answers 200.
func TestReadyWhenTheStoreFails(t *testing.T) {
	st := teststore.Open(t)
	st.Close()
	var logged testlog.Buffer
	rec := httptest.NewRecorder()
	a := &App{store: st}
	readyHandler(a.readyChecks(), &gate{}, testLogger(&logged)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "unavailable: the store does not answer\n" {
		t.Errorf("readyz on a closed store: %d %q", rec.Code, rec.Body.String())
	}
	if !strings.Contains(logged.String(), "database does not answer") {
		t.Errorf("the error was not logged: %q", logged.String())
	}
	rec = httptest.NewRecorder()
	healthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("healthz on a closed store: %d %q, want 200: it is liveness", rec.Code, rec.Body.String())
	}
}

// TestReadyWhenTheIssuerStops: once the issuer stops answering, /readyz
// answers 200 while the keys it fetched are within their lifetime, and 503
// once they are older, since they cannot be fetched again.
func TestReadyWhenTheIssuerStops(t *testing.T) {
	idp := oidctest.New(t, nil)
	var skew atomic.Int64
	res, err := mcpauth.New(idp.Issuer(), "https://agent.test/mcp", &mcpauth.Options{Documents: issuerDocuments(idp),
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	a := &App{store: teststore.Open(t), hosted: &hosted{resource: res}}
	var logged testlog.Buffer
	h := readyHandler(a.readyChecks(), &gate{}, testLogger(&logged))
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReadyPath, nil))
		return rec.Code, rec.Body.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := res.Ready(ctx); err != nil { // the keys are fetched
		t.Fatal(err)
	}
	idp.Close()
	if code, body := probe(); code != 200 {
		t.Errorf("readyz with the issuer down and fresh keys: %d %q, want 200", code, body)
	}
	skew.Store(int64(61 * time.Minute))
	if code, body := probe(); code != 503 || body != notReadyIssuer {
		t.Errorf("readyz with the issuer down and old keys: %d %q, want 503 %q", code, body, notReadyIssuer)
	}
}

// issuerDocuments is the public-document client serve would use for idp:
// through the network guard, its name mapped to it, its CA trusted.
func issuerDocuments(idp *oidctest.Provider) *discovery.Client {
	o := &netguard.Options{RootCAs: idp.CertPool(), Resolve: func(hostport string) (string, bool) {
		return idp.Addr(), hostport == idp.Host()+":443"
	}}
	return discovery.New(&http.Client{Transport: netguard.New(o).Transport()}, nil)
}

// testLogger logs text lines into w.
func testLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
