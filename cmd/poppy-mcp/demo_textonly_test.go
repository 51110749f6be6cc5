package main

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/textonly"
)

// startTextOnlyDemo is `serve --demo` with a client at revision that passes
// the model only text content.
func startTextOnlyDemo(t *testing.T, revision string) *demoSession {
	t.Helper()
	return startDemoServeWith(t, textonly.NewClient("go-sdk-text-only", nil), &sdk.ClientSessionOptions{ProtocolVersion: revision})
}

// text calls a tool and returns all its text, failing on an error result.
func (d *demoSession) text(name string, args map[string]any) string {
	d.t.Helper()
	res, err := d.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError || res.StructuredContent != nil {
		d.t.Fatalf("%s: %v %+v\nstderr: %s", name, err, res, d.stderr.String())
	}
	return textonly.Text(res)
}

// TestServeDemoTextOnly: with the text content alone, on the demo Company
// at both revisions, a model signs in by device (the demo approves it), gets
// a join_url for its own browser, holds a conversation by the ID in the
// text, reads the account's orders through call_api, signs out, and signs
// in to another account in a new Session through the mediated sign-in's
// local page, whose link is in the text.
func TestServeDemoTextOnly(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			d := startTextOnlyDemo(t, rev)
			textonly.Find(t, "user code", textonly.UserCode, d.text("sign_in_device", map[string]any{"domain": demoDomain, "scopes": []string{"poppy:read"}}))
			if text := d.text("sign_in_status", map[string]any{"domain": demoDomain, "wait_seconds": 10}); !strings.Contains(text, ": complete") {
				t.Fatalf("sign_in_status: %s", text)
			}
			join := textonly.Find(t, "join_url", textonly.LocalPage, d.text("open_website", map[string]any{"domain": demoDomain, "url": "/orders"}))
			if resp, err := http.Get(join); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("join_url %s: %v %v", join, resp, err)
			}
			conv := textonly.Find(t, "conversation_id", textonly.ConversationID, d.text("send_message", map[string]any{"domain": demoDomain, "text": "Hello", "wait_seconds": 10}))
			d.text("read_events", map[string]any{"conversation_id": conv})
			if text := d.text("call_api", map[string]any{"domain": demoDomain, "operation": "listOrders"}); !strings.Contains(text, "1042") {
				t.Fatalf("call_api: the orders are not in the text: %s", text)
			}
			d.text("close_conversation", map[string]any{"conversation_id": conv})
			d.text("sign_out", map[string]any{"domain": demoDomain})
			d.text("start_session", map[string]any{"domain": demoDomain, "new": true}) // the old one was Dana's; Sam signs in next

			page := textonly.Find(t, "sign-in page", textonly.SignInPage,
				d.text("sign_in_mediated", map[string]any{"domain": demoDomain, "scopes": []string{"poppy:read"}}))
			codePage := postForm(t, page, url.Values{"email": {"sam@example.com"}, "password": {"sam-secret-42"}})
			inbox := get(t, textonly.Find(t, "inbox", sentToRE, html.UnescapeString(codePage)))
			if done := postForm(t, page, url.Values{"code": {textonly.Find(t, "code", codeRE, inbox)}}); !strings.Contains(done, "You are signed in") {
				t.Fatalf("after the code from the inbox:\n%s", done)
			}
			if text := d.text("sign_in_status", map[string]any{"domain": demoDomain, "wait_seconds": 5}); !strings.Contains(text, "mediated sign-in with "+demoDomain+": complete") {
				t.Fatalf("sign_in_status: %s", text)
			}
		})
	}
}
