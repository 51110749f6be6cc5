package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

const (
	notReadyStore  = "unavailable: the store does not answer\n"
	notReadyIssuer = "unavailable: the authorization server's keys are not current\n"
)

// throwawayPostgres starts a PostgreSQL cluster of the test's own
// (scripts/pg-test-server.sh), for a test that stops it, and returns its
// DSN and a function that stops it. It skips, or fails under
// POPPY_REQUIRE_POSTGRES=1, where the other PostgreSQL tests do.
func throwawayPostgres(t *testing.T) (string, func()) {
	t.Helper()
	if os.Getenv("POPPY_TEST_POSTGRES") == "" {
		postgresURL(t) // skips, or fails under POPPY_REQUIRE_POSTGRES=1
	}
	script, _ := filepath.Abs("../../scripts/pg-test-server.sh")
	out, err := exec.Command("bash", script, "start").Output()
	if err != nil {
		t.Fatalf("pg-test-server.sh start: %v", err)
	}
	dsn := strings.TrimSpace(string(out))
	stop := func() {
		if out, err := exec.Command("bash", script, "stop", dsn).CombinedOutput(); err != nil {
			t.Errorf("pg-test-server.sh stop: %v %s", err, out)
		}
	}
	t.Cleanup(stop)
	return dsn, stop
}

// TestReadyWhenPostgresStops: serve on PostgreSQL is ready while the
// database answers; once it stops, /readyz answers 503 saying the store
// does not answer, while /healthz, liveness, still answers 200.
func TestReadyWhenPostgresStops(t *testing.T) {
	dsn, stopPostgres := throwawayPostgres(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"POPPY_STATE_KEY=" + newKey(), "POPPY_HTTP_TOKEN=ready-test-token-0123456789"}
	u, logged := startLogged(t, env, "serve", "--http", "127.0.0.1:0", "--state-dir", t.TempDir(), "--store", pgURL(cfg, ""))
	base := strings.TrimSuffix(u, "/mcp")
	if resp, body := getWith(t, base+readyPath, nil); resp.StatusCode != 200 {
		t.Fatalf("readyz with the database up: %d %q\n%s", resp.StatusCode, body, logged.String())
	}
	stopPostgres()
	waitFor(t, 30*time.Second, "readyz to answer 503", func() bool { resp, _ := getWith(t, base+readyPath, nil); return resp.StatusCode == 503 })
	if resp, body := getWith(t, base+readyPath, nil); resp.StatusCode != 503 || body != notReadyStore {
		t.Errorf("readyz with the database down: %d %q, want 503 %q", resp.StatusCode, body, notReadyStore)
	}
	if resp, body := getWith(t, base+healthPath, nil); resp.StatusCode != 200 {
		t.Errorf("healthz with the database down: %d %q, want 200", resp.StatusCode, body)
	}
}

// TestReadyWhenTheIssuerIsDown: in hosted mode with an authorization
// server that does not answer from the start, /readyz answers 503 saying
// so, while /healthz answers 200 (before, /healthz said 200 and nothing
// said 503).
func TestReadyWhenTheIssuerIsDown(t *testing.T) {
	idp := oidctest.New(t, nil)
	idp.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, idp.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"SSL_CERT_FILE=" + ca, "POPPY_STATE_KEY=" + newKey()}
	u, logged := startLogged(t, env, "serve", "--http", "127.0.0.1:0", "--state-dir", t.TempDir(), "--public-url", "https://agent.test",
		"--auth-issuer", idp.Issuer(), "--resolve", idp.Host()+":443:"+idp.Addr())
	base := strings.TrimSuffix(u, "/mcp")
	if resp, body := getWith(t, base+readyPath, nil); resp.StatusCode != 503 || body != notReadyIssuer {
		t.Errorf("readyz with the issuer down: %d %q, want 503 %q\n%s", resp.StatusCode, body, notReadyIssuer, logged.String())
	}
	if resp, body := getWith(t, base+healthPath, nil); resp.StatusCode != 200 {
		t.Errorf("healthz with the issuer down: %d %q, want 200", resp.StatusCode, body)
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
	a := &app{store: openTestStore(t), hosted: &hosted{resource: res}}
	var logged testlog.Buffer
	h := readyHandler(a.readyChecks(), &gate{}, testLogger(&logged))
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, readyPath, nil))
		return rec.Code, rec.Body.String()
	}
	waitFor(t, 10*time.Second, "readyz to answer 200 once the keys are fetched", func() bool { code, _ := probe(); return code == 200 })
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

// openTestStore is a new SQLite store, closed when the test ends.
func openTestStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), &store.Options{Key: make([]byte, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
