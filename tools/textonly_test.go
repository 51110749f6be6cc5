package tools_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/textonly"
)

// textOnly connects a client that passes the model only text content.
func (h *harness) textOnly(t *testing.T, revision string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return h.connectClient(t, textonly.NewClient("go-sdk-text-only", opts), revision)
}

// callText calls a tool through a text-only client and returns its text.
func callText(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	res, _ := call2(t, cs, name, args)
	if res.StructuredContent != nil {
		t.Fatalf("%s: the client kept structuredContent", name)
	}
	return res, textonly.Text(res)
}

// TestTextOnlyClient: with the text content alone a model finishes device
// sign-in, website joining, a conversation and an API call, and mediated
// sign-in through the local page, at both revisions: every link, code and ID
// is in the text. Before, sign_in_mediated said "Show the user the link"
// without one, and open_website named a join_url it did not give.
func TestTextOnlyClient(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(nil))
			cs := h.textOnly(t, rev, nil)

			res, text := callText(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
			if err := h.company.ApproveDevice(textonly.Find(t, "user code", textonly.UserCode, text), "acct_dana"); err != nil {
				t.Fatal(err)
			}
			final, text := callText(t, cs, "sign_in_status", map[string]any{"domain": domain, "wait_seconds": 10})
			if !strings.Contains(text, "device sign-in with example.com: complete") {
				t.Fatalf("sign_in_status: %s", text)
			}
			scanForSecrets(t, h, res, final)

			_, text = callText(t, cs, "open_website", map[string]any{"domain": domain, "url": "/orders"})
			p := openJoin(t, h, textonly.Find(t, "join_url", textonly.LocalPage, text))
			if resp := postJoin(t, h, p); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 ||
				!strings.Contains(ordersPage(t, h, resp.Cookies()[0]), `data-signed-in="true"`) {
				t.Fatalf("the join page did not join the signed-in Session: %d", resp.StatusCode)
			}

			_, text = callText(t, cs, "send_message", map[string]any{"domain": domain, "text": "Where is order 1042?", "wait_seconds": 5})
			conv := textonly.Find(t, "conversation_id", textonly.ConversationID, text)
			if res, text := callText(t, cs, "read_events", map[string]any{"conversation_id": conv}); res.IsError {
				t.Fatalf("read_events with the ID from the text: %s", text)
			}

			if _, text = callText(t, cs, "call_api", map[string]any{"domain": domain, "operation": "listOrders"}); !strings.Contains(text, "ord_1042") {
				t.Fatalf("call_api: the body is not in the text: %s", text)
			}
		})
	}
}

// TestTextOnlyMediated: the mediated sign-in's local page, from the text.
func TestTextOnlyMediated(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, nil)
			cs := h.textOnly(t, rev, nil)
			res, text := callText(t, cs, "sign_in_mediated", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
			u := textonly.Find(t, "sign-in page", textonly.SignInPage, text)
			b := newUserBrowser(t, h.local)
			page := b.fillCredentials(u, "sam@example.com", "sam-secret-42")
			if done := codeStep(t, b, h.company, u, page); !strings.Contains(done, "You are signed in") {
				t.Fatalf("after the code: %s", done)
			}
			final, text := callText(t, cs, "sign_in_status", map[string]any{"domain": domain, "wait_seconds": 5})
			if !strings.Contains(text, "mediated sign-in with example.com: complete") {
				t.Fatalf("sign_in_status: %s", text)
			}
			scanForSecrets(t, h, res, final)
		})
	}
}

// TestSignInElicitationFails: a client that declares URL elicitation and
// answers it with an error gets the normal result, the code and the link in
// its text. Before, sign_in_device answered JSON-RPC -32603 and no code.
// Only the 2025 revision: there poppy-mcp asks (elicitation/create); at
// 2026-07-28 the client fulfils the input request itself, and a go-sdk
// client whose handler fails ends the call on its side.
func TestSignInElicitationFails(t *testing.T) {
	t.Parallel()
	h := newSignInHarness(t, signInOpts(nil))
	asked := 0
	cs := h.textOnly(t, revisions[0], &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked++
			return nil, errors.New("this client cannot open links")
		},
	})
	res, text := callText(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
	if res.IsError || asked != 1 || !strings.Contains(text, `"elicitation":"failed"`) {
		t.Fatalf("sign_in_device (elicitations %d): %s", asked, text)
	}
	textonly.Find(t, "user code", textonly.UserCode, text)
	_, text = callText(t, cs, "sign_in_mediated", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
	if asked != 2 || !textonly.LocalPage.MatchString(text) {
		t.Fatalf("sign_in_mediated (elicitations %d): %s", asked, text)
	}
	scanForSecrets(t, h, res)
}
