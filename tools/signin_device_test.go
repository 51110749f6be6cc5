package tools_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

const domain = "example.com"

// newSignInHarness is newHarness whose tools Server is closed at the end,
// stopping its background polls.
func newSignInHarness(t *testing.T, opts *poppytest.Options) *harness {
	t.Helper()
	return newSignInHarnessOn(t, nil, opts)
}

// newSignInHarnessOn is newSignInHarness on the in-memory network n of a
// synctest bubble (inBubble; nil: loopback ports), where the device
// flow's intervals pass on the bubble's clock.
func newSignInHarnessOn(t *testing.T, n *memnet.Network, opts *poppytest.Options) *harness {
	t.Helper()
	h := newHarnessWith(t, opts, &harnessOptions{Net: n})
	t.Cleanup(h.tools.Close)
	return h
}

// signInOpts are the Company options of sign-in tests: a one-second device interval.
func signInOpts(edit func(*poppytest.Options)) *poppytest.Options {
	o := &poppytest.Options{DeviceInterval: time.Second}
	if edit != nil {
		edit(o)
	}
	return o
}

// startDevice calls sign_in_device and checks the pending result.
func startDevice(t *testing.T, cs *sdk.ClientSession, scopes ...string) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, got := call(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": scopes})
	if res.IsError || got["status"] != "pending" || got["user_code"] == "" || got["verification_uri"] == "" ||
		got["verification_uri_complete"] == "" || got["expires_in"] == nil {
		t.Fatalf("sign_in_device = %v (isError %v)", got, res.IsError)
	}
	if _, ok := got["device_code"]; ok {
		t.Fatal("sign_in_device returned the device code")
	}
	return res, got
}

// status calls sign_in_status, waiting up to wait seconds.
func status(t *testing.T, cs *sdk.ClientSession, wait int) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	return call(t, cs, "sign_in_status", map[string]any{"domain": domain, "wait_seconds": wait})
}

// signIn signs in by device for dana with scopes and returns the last result.
func signIn(t *testing.T, h *harness, cs *sdk.ClientSession, scopes ...string) map[string]any {
	t.Helper()
	_, got := startDevice(t, cs, scopes...)
	if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
		t.Fatal(err)
	}
	_, st := status(t, cs, 10)
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status = %v", st)
	}
	return st
}

func strs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// kept returns the Account Token poppy-mcp keeps for the Company, or "".
func (h *harness) kept(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	user, err := h.store.UserID(ctx, h.company.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	at, err := h.store.AccountToken(ctx, h.company.Issuer(), user, auth.DefaultAccountLabel)
	if err != nil {
		return ""
	}
	return at.Token.RevealString()
}

// TestSignInDevice: approved with fewer scopes than asked, the sign-in
// completes, names the missing scope, and keeps the Account Token.
func TestSignInDevice(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(nil))
			cs := h.connect(t, rev)
			first, got := startDevice(t, cs, "poppy:read", "poppy:write")
			_, pending := status(t, cs, 0)
			if pending["status"] != "pending" || pending["user_code"] != got["user_code"] {
				t.Errorf("status before approval = %v", pending)
			}
			if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana", "poppy:read"); err != nil {
				t.Fatal(err)
			}
			res, st := status(t, cs, 10)
			if res.IsError || st["status"] != "complete" || st["signed_in"] != true ||
				!slices.Equal(strs(st["scopes"]), []string{"poppy:read"}) || !slices.Equal(strs(st["missing_scopes"]), []string{"poppy:write"}) {
				t.Fatalf("sign_in_status = %v", st)
			}
			if h.kept(t) == "" {
				t.Error("the Account Token was not kept")
			}
			if n := len(h.company.SignedInSessions()); n != 1 {
				t.Errorf("signed-in Sessions at the Company = %d", n)
			}
			scanForSecrets(t, h, first, pending, res)
		})
	}
}

func TestSignInDeviceDeniedExpired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		act        func(s *poppytest.Server, code string) error
	}{
		{"denied", "denied", (*poppytest.Server).DenyDevice},
		{"expired", "expired", (*poppytest.Server).ExpireDevice},
	} {
		for _, rev := range revisions {
			t.Run(tc.name+"/"+rev, func(t *testing.T) {
				t.Parallel()
				h := newSignInHarness(t, signInOpts(nil))
				cs := h.connect(t, rev)
				_, got := startDevice(t, cs, "poppy:read")
				if err := tc.act(h.company, got["user_code"].(string)); err != nil {
					t.Fatal(err)
				}
				res, st := status(t, cs, 10)
				if !res.IsError || st["status"] != tc.want || st["signed_in"] != false {
					t.Fatalf("sign_in_status = %v", st)
				}
				if h.kept(t) != "" {
					t.Error("a failed sign-in kept an Account Token")
				}
			})
		}
	}
}

// TestSignInDeviceSlowDown: after slow_down the agent waits 6 s (poppytest
// reports a poll sooner than the grown interval as a violation).
func TestSignInDeviceSlowDown(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, n *memnet.Network) {
		h := newSignInHarnessOn(t, n, signInOpts(nil))
		cs := h.connect(t, revisions[1])
		h.company.SlowDown(1)
		_, got := startDevice(t, cs, "poppy:read")
		if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
			t.Fatal(err)
		}
		_, st := status(t, cs, 20)
		if st["status"] != "complete" {
			t.Fatalf("sign_in_status = %v", st)
		}
		if n := h.company.Served("slow_down"); n != 1 {
			t.Errorf("slow_down served %d times", n)
		}
	})
}

// TestSignInDeviceProgress: waiting sends progress notifications.
func TestSignInDeviceProgress(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(nil))
			progress := make(chan float64, 10)
			cs := h.connectWith(t, rev, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
				progress <- r.Params.Progress
			}})
			startDevice(t, cs, "poppy:read")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			params := &sdk.CallToolParams{Name: "sign_in_status", Arguments: map[string]any{"domain": domain, "wait_seconds": 3}}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("sign_in_status: %v %v", err, res)
			}
			if len(progress) == 0 {
				t.Error("no progress notification while waiting")
			}
		})
	}
}

// TestSignInDeviceReusesPending: asking again for the same scopes while the
// user is on the page gives the same code, not a second device request.
func TestSignInDeviceReusesPending(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	_, first := startDevice(t, cs, "poppy:read")
	_, again := startDevice(t, cs, "poppy:read")
	if first["user_code"] != again["user_code"] || h.company.Served("device_code") != 1 {
		t.Errorf("codes %v then %v, device requests %d", first["user_code"], again["user_code"], h.company.Served("device_code"))
	}
}

func TestSignInDeviceBadScopes(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[1])
	res, got := call(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{"addresses"}})
	// Only Direct Sign-In offers it, and this poppy-mcp has no callback for it.
	if !res.IsError || got["error"] != "scope_not_offered" || got["tool"] != "" {
		t.Errorf("a scope only Direct Sign-In offers: %v", got)
	}
	// The schema's minItems refuses an empty list; a list of blank scopes
	// fits it and names none.
	res, got = call(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{}})
	if !res.IsError || got["error"] != "invalid_arguments" || !strings.Contains(got["detail"].(string), "`scopes`") {
		t.Errorf("no scopes: %v", got)
	}
	res, got = call(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{" "}})
	if !res.IsError || got["error"] != "scopes_required" {
		t.Errorf("blank scopes: %v", got)
	}
}

// another returns a second poppy-mcp over the same store and agent, as when
// the assistant starts another process, and a client of it.
func (h *harness) another(t *testing.T, rev string) (*tools.Server, *sdk.ClientSession) {
	t.Helper()
	return h.anotherWith(t, rev, h.store)
}

// anotherProcess is another whose store is opened anew on the same state,
// as another process's would be: on SQLite it hears none of this
// process's notifications (store.Notify).
func (h *harness) anotherProcess(t *testing.T, rev string) (*tools.Server, *sdk.ClientSession) {
	t.Helper()
	st, err := store.Open(context.Background(), h.store.Dir(), &store.Options{Key: bytes.Repeat([]byte{7}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return h.anotherWith(t, rev, st)
}

// anotherWith is another over st.
func (h *harness) anotherWith(t *testing.T, rev string, st *store.Store) (*tools.Server, *sdk.ClientSession) {
	t.Helper()
	return h.anotherServing(t, rev, st, h.pages)
}

// anotherServing is another over st serving its pages with pg.
func (h *harness) anotherServing(t *testing.T, rev string, st *store.Store, pg *pages.Server) (*tools.Server, *sdk.ClientSession) {
	t.Helper()
	ts := tools.New(discovery.New(&http.Client{Transport: cache.New(h.company.Transport(), nil)}, nil), &tools.Options{
		Agent: h.agent, Store: st, Pages: pg,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(ts.Close)
	t.Cleanup(func() { ts.ShutdownHTTP(context.Background()) }) // stops the idle sweepers, after hs.Close
	hs := newHTTPServer(ts.HTTPHandler(), h.net)
	t.Cleanup(hs.Close)
	h2 := *h
	h2.url = hs.URL + "/mcp"
	return ts, h2.connect(t, rev)
}

// TestSignInDeviceStopsOnClose: closing the tools Server stops the
// background poll and hands the sign-in back: it stays pending in the
// store, for another replica (or the next run) to take over.
func TestSignInDeviceStopsOnClose(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	cs := h.connect(t, revisions[0])
	startDevice(t, cs, "poppy:read")
	h.tools.Close() // waits for the poll to end
	polls := devicePolls(h)
	_, st := status(t, cs, 0)
	if st["status"] != "pending" {
		t.Errorf("after Close: %v", st)
	}
	if n := devicePolls(h); n != polls {
		t.Errorf("%d polls after Close", n-polls)
	}
}

// devicePolls counts the device_code grants the Company received.
func devicePolls(h *harness) int {
	polls := 0
	for _, r := range h.company.Requests() {
		if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "device_code") {
			polls++
		}
	}
	return polls
}

// TestSignInExtraScopes: a Company that grants more than was asked (it
// breaks Poppy 0.1 §4.4) is noticed: sign_in_status shows scopes_granted
// beside scopes_requested and names the extra scopes, and a warning is
// logged. The old code said nothing.
func TestSignInExtraScopes(t *testing.T) {
	t.Parallel()
	opts := signInOpts(nil)
	opts.Flaws.ExtraScopes = true
	h := newSignInHarness(t, opts)
	cs := h.connect(t, revisions[0])
	_, got := startDevice(t, cs, "poppy:read")
	if err := h.company.ApproveDevice(got["user_code"].(string), "acct_dana"); err != nil {
		t.Fatal(err)
	}
	res, st := status(t, cs, 10)
	text := res.Content[0].(*sdk.TextContent).Text
	if st["status"] != "complete" || !slices.Equal(strs(st["scopes_granted"]), []string{"poppy:read", "poppy:write"}) ||
		!slices.Equal(strs(st["scopes_requested"]), []string{"poppy:read"}) ||
		!slices.Equal(strs(st["scopes_not_requested"]), []string{"poppy:write"}) {
		t.Fatalf("sign_in_status = %v", st)
	}
	if !strings.Contains(text, `not asked for (Company text "poppy:write")`) {
		t.Errorf("the text does not say so: %q", text)
	}
	if !strings.Contains(h.logs.String(), "granted scopes that were not requested") {
		t.Errorf("no warning logged:\n%s", h.logs.String())
	}
}
