package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/internal/oidctest"
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
	t.Parallel()
	dsn, stopPostgres := throwawayPostgres(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"POPPY_STATE_KEY=" + newKey(), "POPPY_HTTP_TOKEN=ready-test-token-0123456789"}
	u, logged := startLogged(t, env, "serve", "--http", "127.0.0.1:0", "--state-dir", t.TempDir(), "--store", pgURL(cfg, ""))
	base := strings.TrimSuffix(u, "/mcp")
	if resp, body := getWith(t, base+app.ReadyPath, nil); resp.StatusCode != 200 {
		t.Fatalf("readyz with the database up: %d %q\n%s", resp.StatusCode, body, logged.String())
	}
	stopPostgres()
	waitFor(t, 30*time.Second, "readyz to answer 503", func() bool { resp, _ := getWith(t, base+app.ReadyPath, nil); return resp.StatusCode == 503 })
	if resp, body := getWith(t, base+app.ReadyPath, nil); resp.StatusCode != 503 || body != notReadyStore {
		t.Errorf("readyz with the database down: %d %q, want 503 %q", resp.StatusCode, body, notReadyStore)
	}
	if resp, body := getWith(t, base+app.HealthPath, nil); resp.StatusCode != 200 {
		t.Errorf("healthz with the database down: %d %q, want 200", resp.StatusCode, body)
	}
}

// TestReadyWhenTheIssuerIsDown: in hosted mode with an authorization
// server that does not answer from the start, /readyz answers 503 saying
// so, while /healthz answers 200 (before, /healthz said 200 and nothing
// said 503).
func TestReadyWhenTheIssuerIsDown(t *testing.T) {
	t.Parallel()
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
	if resp, body := getWith(t, base+app.ReadyPath, nil); resp.StatusCode != 503 || body != notReadyIssuer {
		t.Errorf("readyz with the issuer down: %d %q, want 503 %q\n%s", resp.StatusCode, body, notReadyIssuer, logged.String())
	}
	if resp, body := getWith(t, base+app.HealthPath, nil); resp.StatusCode != 200 {
		t.Errorf("healthz with the issuer down: %d %q, want 200", resp.StatusCode, body)
	}
}
