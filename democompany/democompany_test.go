package democompany_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/democompany"
	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
)

// TestStart: the demo Company serves its domain, its guard options send
// only its hosts to its listener, and its inbox page answers on loopback,
// as the log says.
func TestStart(t *testing.T) {
	logs := &testlog.Buffer{}
	dc, err := democompany.Start(slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if dc.Server().Domain() != democompany.Domain {
		t.Errorf("domain %s", dc.Server().Domain())
	}
	g := dc.GuardOptions()
	if addr, ok := g.Resolve("auth." + democompany.Domain + ":443"); !ok || addr != dc.Addr() {
		t.Errorf("auth.%s resolves to %q %v, want %s", democompany.Domain, addr, ok, dc.Addr())
	}
	if _, ok := g.Resolve("example.com:443"); ok {
		t.Error("another host resolves to the demo Company")
	}
	if g.RootCAs == nil {
		t.Error("no CA to trust")
	}
	resp, err := http.Get(dc.InboxURL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Demo inbox") {
		t.Errorf("inbox: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), dc.InboxURL()) {
		t.Errorf("the log does not say where the inbox is: %s", logs)
	}
	// Sam's one-time codes go to the inbox, as the code_required answer says.
	step, err := newAgent(t, dc.Server()).sess.SignInMediated(context.Background(), []string{"poppy:read"},
		map[string]auth.Secret{"email": auth.NewSecret("sam@example.com"), "password": auth.NewSecret("sam-secret-42")})
	if err != nil || step.Status != auth.MediatedCodeRequired || !strings.Contains(step.SentTo, dc.InboxURL()) {
		t.Errorf("mediated sign-in to Sam: %+v %v", step, err)
	}
}
