package tools_test

import (
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestSignOut: the Account Token is revoked and forgotten; the Session
// continues signed out, or a new one starts when the Company ended it.
func TestSignOut(t *testing.T) {
	t.Parallel()
	for _, end := range []bool{false, true} {
		for _, rev := range revisions {
			t.Run(map[bool]string{false: "continue", true: "ended"}[end]+"/"+rev, func(t *testing.T) {
				t.Parallel()
				h := newSignInHarness(t, signInOpts(func(o *poppytest.Options) { o.EndSessionsOnSignOut = end }))
				cs := h.connect(t, rev)
				before := signIn(t, h, cs, "poppy:read")
				res, got := call(t, cs, "sign_out", map[string]any{"domain": domain})
				if res.IsError || got["revoked"] != true || got["signed_in"] != false {
					t.Fatalf("sign_out = %v", got)
				}
				if same := got["session_id"] == before["session_id"]; same == end {
					t.Errorf("Session %v after sign-out, was %v (ended %v)", got["session_id"], before["session_id"], end)
				}
				if h.company.Served("revoked") != 1 || h.kept(t) != "" {
					t.Error("the Account Token was not revoked and forgotten")
				}
				_, st := call(t, cs, "start_session", map[string]any{"domain": domain})
				if st["signed_in"] != false {
					t.Errorf("start_session after sign-out = %v", st)
				}
				scanForSecrets(t, h, res)
			})
		}
	}
}

// TestSignOutRevokedNotRenewed: when the Account Token is revoked but the
// Session cannot be renewed after it (the token endpoint is rate limited),
// sign_out says the token is revoked, not kept, and poppy-mcp no longer
// holds it: a second try does not take it for one the Company refused.
func TestSignOutRevokedNotRenewed(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[1])
	signIn(t, h, cs, "poppy:read")
	h.company.RateLimit("auth."+domain, "/oauth/token", 1, 2*time.Minute) // past auth's MaxWait: it fails at once
	res, got := call(t, cs, "sign_out", map[string]any{"domain": domain})
	text := res.Content[0].(*sdk.TextContent).Text
	if !res.IsError || got["error"] != "session_not_renewed" || got["revoked"] != true ||
		!strings.Contains(text, "revoked") || strings.Contains(text, "kept") {
		t.Fatalf("sign_out = %v %q", got, text)
	}
	if h.company.Served("revoked") != 1 || h.kept(t) != "" {
		t.Error("the Account Token was not revoked and forgotten")
	}
	res, got = call(t, cs, "sign_out", map[string]any{"domain": domain})
	if text := res.Content[0].(*sdk.TextContent).Text; got["revoked"] != false || strings.Contains(text, "kept") {
		t.Errorf("second sign_out = %v %q", got, text)
	}
	if _, st := status(t, cs, 0); st["notice"] != nil {
		t.Errorf("sign_in_status after sign-out = %v: the revoked token taken for a refused one", st)
	}
}

// TestStartSessionWithAccountToken: a later poppy-mcp starts signed in with
// the Account Token kept, and says so when the Company refused it.
func TestStartSessionWithAccountToken(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(func(o *poppytest.Options) { o.RotateRefreshTokens = true }))
			signIn(t, h, h.connect(t, rev), "poppy:read", "poppy:write")
			_, cs2 := h.another(t, rev)
			_, got := call(t, cs2, "start_session", map[string]any{"domain": domain, "new": true})
			if got["signed_in"] != true || len(strs(got["scopes"])) != 2 {
				t.Fatalf("start_session with an Account Token = %v", got)
			}
			h.company.RevokeAccountTokens("acct_dana")
			res, got := call(t, cs2, "start_session", map[string]any{"domain": domain, "new": true})
			text := res.Content[0].(*sdk.TextContent).Text
			if got["signed_in"] != false || !strings.Contains(text, "refused") || got["notice"] == nil {
				t.Fatalf("start_session with a revoked Account Token = %v %q", got, text)
			}
			if h.kept(t) != "" {
				t.Error("the refused Account Token is still kept")
			}
		})
	}
}

// TestHeldTokenInsteadOfSignIn: another poppy-mcp process running at the
// same time, unheard (its own store, as on SQLite), has a Session of its
// own (two processes do not continue one Session), still signed out; it
// uses the Account Token already held instead of a new sign-in (Poppy 0.1
// §4.4).
func TestHeldTokenInsteadOfSignIn(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	_, first := call(t, cs, "start_session", map[string]any{"domain": domain})
	_, cs2 := h.anotherProcess(t, revisions[1])
	_, second := call(t, cs2, "start_session", map[string]any{"domain": domain})
	if second["session_id"] == first["session_id"] || second["signed_in"] != false {
		t.Fatalf("the second process: %v, want a Session of its own, signed out (the first is %v)", second, first["session_id"])
	}
	signIn(t, h, cs, "poppy:read")
	res, got := call(t, cs2, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
	if res.IsError || got["status"] != "complete" || got["signed_in"] != true || got["session_id"] != second["session_id"] {
		t.Fatalf("sign_in_device with a held token = %v", got)
	}
	if n := h.company.Served("device_code"); n != 1 {
		t.Errorf("device requests = %d: a new sign-in was started", n)
	}
}

// TestSignInAgainForMoreScopes: a new sign-in for more scopes replaces the
// Account Token and revokes the old one; a different account starts a new
// Session (account_mismatch).
func TestSignInAgainForMoreScopes(t *testing.T) {
	t.Parallel()
	for _, account := range []string{"acct_dana", "acct_sam"} {
		t.Run(account, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(nil))
			cs := h.connect(t, revisions[1])
			first := signIn(t, h, cs, "poppy:read")
			old := h.kept(t)
			_, got := startDevice(t, cs, "poppy:read", "poppy:write")
			if err := h.company.ApproveDevice(got["user_code"].(string), account); err != nil {
				t.Fatal(err)
			}
			_, st := status(t, cs, 10)
			if st["status"] != "complete" || len(strs(st["scopes"])) != 2 {
				t.Fatalf("second sign-in = %v", st)
			}
			if h.kept(t) == old || h.company.Served("revoked") != 1 {
				t.Errorf("the old Account Token was not replaced and revoked (revoked %d)", h.company.Served("revoked"))
			}
			if mismatch := account != "acct_dana"; (st["session_id"] != first["session_id"]) != mismatch {
				t.Errorf("Session %v then %v for %s", first["session_id"], st["session_id"], account)
			}
		})
	}
}

// TestSignInWithoutAccountToken: a Company that signs in without a
// refresh_token (breaking Poppy 0.1 §4.4) leaves a Session that cannot be
// renewed signed in. Once its token is due, poppy-mcp starts a new
// signed-out Session instead of sending a renewal the Company refuses, and
// the next result that asks for a sign-in says why.
func TestSignInWithoutAccountToken(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(func(o *poppytest.Options) { o.NoAccountTokens = true }))
			cs := h.connect(t, rev)
			before := signIn(t, h, cs, "poppy:read")
			if res, got := call(t, cs, "call_api", map[string]any{"domain": domain, "operation": "listOrders"}); res.IsError {
				t.Fatalf("listOrders signed in = %v", got)
			}
			h.company.ExpireTokens()
			res, got := call(t, cs, "call_api", map[string]any{"domain": domain, "operation": "listOrders"})
			text := res.Content[0].(*sdk.TextContent).Text
			if !res.IsError || got["error"] != "sign_in_required" || !strings.Contains(text, "new signed-out Session") || got["notice"] == nil {
				t.Fatalf("listOrders once the token is due = %v %q", got, text)
			}
			_, st := call(t, cs, "start_session", map[string]any{"domain": domain})
			if st["signed_in"] != false || st["session_id"] == before["session_id"] {
				t.Errorf("start_session = %v, want a new signed-out Session in place of %v", st, before["session_id"])
			}
		})
	}
}

// TestDisconnectedAtTheCompany: the User disconnects poppy-mcp in the
// Company's account settings (Poppy 0.1 §4.9). On main this left the User
// stuck: call_api got sign_in_required and advised sign_in_device, which
// answered "complete" from the Session's cached state, and call_api failed
// again for the Session Token's lifetime. Now the refused Account Token is
// found out and dropped, the advice says why, and sign_in_device starts a
// real sign-in whose approval makes call_api work again; also when the model
// calls sign_in_device before any request failed.
func TestDisconnectedAtTheCompany(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"call_api", "sign_in_device"} {
		for _, rev := range revisions {
			t.Run(first+"/"+rev, func(t *testing.T) {
				t.Parallel()
				h := newSignInHarness(t, signInOpts(nil))
				cs := h.connect(t, rev)
				listOrders := map[string]any{"domain": domain, "operation": "listOrders"}
				signIn(t, h, cs, "poppy:read")
				if res, got := call(t, cs, "call_api", listOrders); res.IsError {
					t.Fatalf("listOrders signed in = %v", got)
				}
				h.company.RevokeAccountTokens("acct_dana")
				if first == "call_api" {
					res, got := call(t, cs, "call_api", listOrders)
					text := res.Content[0].(*sdk.TextContent).Text
					if !res.IsError || got["error"] != "sign_in_required" || got["tool"] != "sign_in_device" || !strings.Contains(text, "refused") {
						t.Fatalf("listOrders after the disconnect = %v %q", got, text)
					}
				}
				_, got := startDevice(t, cs, "poppy:read") // pending: a real sign-in, not "complete"
				if h.kept(t) != "" {
					t.Error("the refused Account Token is still kept")
				}
				if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
					t.Fatal(err)
				}
				if _, st := status(t, cs, 10); st["status"] != "complete" || st["signed_in"] != true {
					t.Fatalf("sign_in_status = %v", st)
				}
				res, got := call(t, cs, "call_api", listOrders)
				if res.IsError || got["status"] != 200.0 {
					t.Fatalf("listOrders after signing in again = %v", got)
				}
				scanForSecrets(t, h, res)
			})
		}
	}
}
