package tools_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// asPerson serves a tools.Server as the given person of a hosted
// deployment, as mcpauth's middleware would after checking their token,
// and connects a client to it.
func (h *harness) asPerson(t *testing.T, person mcpauth.User) (*tools.Server, *sdk.ClientSession) {
	t.Helper()
	ts := tools.New(discovery.New(&http.Client{Transport: cache.New(h.company.Transport(), nil)}, nil), &tools.Options{
		Agent: h.agent, Store: h.store, Pages: h.pages,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	inner := ts.HTTPHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r.WithContext(mcpauth.WithUser(r.Context(), person)))
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(ts.Close)
	h2 := *h
	h2.url = hs.URL + "/mcp"
	return ts, h2.connect(t, revisions[1])
}

// TestSignInTakenOverForItsPerson: a hosted person's device sign-in, left
// pending by a replica that shut down, is taken over by another replica
// for that person: polled with their Session, its Account Token kept in
// their own state, and read complete through the new replica. Without the
// person recorded with the kept sign-in, the replica taking it over would
// act as nobody in particular (the default user), or never find it.
func TestSignInTakenOverForItsPerson(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	dana := mcpauth.User{Issuer: "https://login.example.org", Subject: "dana"}
	first, cs := h.asPerson(t, dana)
	_, got := startDevice(t, cs, "poppy:read")
	first.Close() // hands the pending sign-in back to the store
	_, cs2 := h.asPerson(t, dana)
	if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if _, st = status(t, cs2, 5); st["status"] == "complete" {
			break
		}
	}
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status through the replica that took over: %v\n%s", st, h.logs.String())
	}
	ctx := context.Background()
	mine := h.store.ForUser(dana.Key())
	userID, err := mine.UserID(ctx, h.company.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.AccountToken(ctx, h.company.Issuer(), userID, auth.DefaultAccountLabel); err != nil {
		t.Errorf("dana's Account Token is not in dana's state: %v", err)
	}
	if h.kept(t) != "" {
		t.Error("the default user holds an Account Token: the sign-in was taken over for nobody in particular")
	}
	signedIn := h.company.SignedInSessions()
	if len(signedIn) == 0 {
		t.Error("no Session is signed in at the Company")
	}
	for _, sess := range signedIn { // the Session polled with and the new replica's own: both dana's
		if sess.UserID != userID || sess.Account != "acct_dana" {
			t.Errorf("a signed-in Session %+v is not dana's User %s", sess, userID)
		}
	}
}
