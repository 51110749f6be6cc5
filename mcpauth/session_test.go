package mcpauth_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSessionBoundToItsUser: an MCP session (2025-11-25) opened by one
// person cannot be used by another with their own valid token: not to send
// requests into it, nor to open its stream and read what is sent to it,
// whether they name its ID as the client saw it or as the MCP server made
// it. Its owner goes on using it. Without the binding, any authenticated
// person who learned a session ID could read another's notifications.
func TestSessionBoundToItsUser(t *testing.T) {
	d := newDeployment(t, nil)
	alice, bob := d.client(d.idp.AccessToken(t, mcpClient, "alice")), d.client(d.idp.AccessToken(t, mcpClient, "bob"))
	resp := postMCP(t, alice, "/mcp", initialize, nil)
	id := resp.Header.Get("Mcp-Session-Id")
	raw, _, tagged := strings.Cut(id, ".")
	if resp.StatusCode != 200 || !tagged || !strings.HasPrefix(raw, "mcp-session-") {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, id)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, sid := range []string{id, raw, raw + ".AAAAAAAAAAAAAAAAAAAAAA"} {
		if resp := postMCP(t, bob, "/mcp", list, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob posting into alice's session as %q: %d, want 404", sid, resp.StatusCode)
		}
		if code := getStream(t, bob, sid); code != http.StatusNotFound {
			t.Errorf("bob opening alice's stream as %q: %d, want 404", sid, code)
		}
	}
	if resp := postMCP(t, alice, "/mcp", list, map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-11-25"}); resp.StatusCode != 200 {
		t.Errorf("alice in her own session: %d", resp.StatusCode)
	}
	if resp := postMCP(t, alice, "/mcp", list, map[string]string{"Mcp-Session-Id": raw, "MCP-Protocol-Version": "2025-11-25"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("alice with the untagged ID: %d, want 404", resp.StatusCode)
	}
	if code := getStream(t, alice, id); code != 200 {
		t.Errorf("alice opening her own stream: %d", code)
	}
	if !strings.Contains(d.logs.String(), "not its user's") {
		t.Error("the refused session was not logged")
	}
}

// getStream opens the session's SSE stream and returns the status.
func getStream(t *testing.T, c *http.Client, sid string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, resourceURL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
