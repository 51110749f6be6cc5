package tools_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSignInLeaks runs every sign-in flow, sign-out and a Session started
// from the Account Token, then scans every message the client received
// (results, progress notifications, log messages), every page the user's
// browser was shown and every log line for every token, device code,
// assertion, authorization code, verifier, credential and one-time code the
// Company issued or was given.
func TestSignInLeaks(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newDirectHarness(t)
			var mu sync.Mutex
			var seen []any
			keep := func(v any) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, v)
			}
			cs := h.connectWith(t, rev, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { keep(r.Params) },
				LoggingMessageHandler:       func(_ context.Context, r *sdk.LoggingMessageRequest) { keep(r.Params) },
			})
			do := func(name string, args map[string]any) map[string]any {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				p := &sdk.CallToolParams{Name: name, Arguments: args}
				p.SetProgressToken(name)
				res, err := cs.CallTool(ctx, p)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				keep(res)
				m, _ := res.StructuredContent.(map[string]any)
				return m
			}
			b := h.user // under the public URL, with the deployment's credential
			pages := []string{}

			// Mediated Sign-In with a one-time code, then sign-out.
			got := do("sign_in_mediated", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
			u := got["sign_in_url"].(string)
			page := b.fillCredentials(u, "sam@example.com", "sam-secret-42")
			pages = append(pages, page, codeStep(t, b, h.company, u, page))
			if st := do("sign_in_status", map[string]any{"domain": domain, "wait_seconds": 5}); st["status"] != "complete" {
				t.Fatalf("mediated: %v", st)
			}
			do("sign_out", map[string]any{"domain": domain})

			// Device Sign-In for another account, waited for with progress:
			// the Session, once sam's, is replaced (account_mismatch).
			got = do("sign_in_device", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
			go func() {
				time.Sleep(1500 * time.Millisecond)
				h.company.ApproveDevice(got["user_code"].(string), "acct_dana")
			}()
			if st := do("sign_in_status", map[string]any{"domain": domain, "wait_seconds": 15}); st["status"] != "complete" {
				t.Fatalf("device: %v", st)
			}

			// Direct Sign-In for more scopes: the device Account Token is
			// replaced and revoked.
			got = do("sign_in_direct", map[string]any{"domain": domain, "scopes": []string{"poppy:read", "addresses"}})
			to, err := h.company.ApproveAuthorization(h.open(t, got), "acct_dana")
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, h.back(t, to, nil))
			if st := do("sign_in_status", map[string]any{"domain": domain, "wait_seconds": 5}); st["status"] != "complete" {
				t.Fatalf("direct: %v", st)
			}
			if st := do("start_session", map[string]any{"domain": domain, "new": true}); st["signed_in"] != true {
				t.Fatalf("start_session with the Account Token: %v", st)
			}
			do("sign_out", map[string]any{"domain": domain})

			mu.Lock()
			defer mu.Unlock()
			for _, p := range pages {
				seen = append(seen, p)
			}
			if n := h.company.Served("revoked"); n < 3 {
				t.Errorf("revocations = %d, want two sign-outs and the replaced token", n)
			}
			for _, kind := range []string{"device_code", "account_token"} {
				if h.company.Served(kind) == 0 {
					t.Errorf("the Company issued no %s: the scan would miss it", kind)
				}
			}
			scanForSecrets(t, h.harness, seen...)
			if strings.Contains(h.logs.String(), url.QueryEscape("sam-secret-42")) {
				t.Error("a credential was logged")
			}
		})
	}
}
