package tools_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// hostileConversationCases are the hostile-Company cases of this group (see TestHostileCompany).
func hostileConversationCases() []hostileCase {
	return []hostileCase{
		{
			// A Company answering has_more forever made 20,431 requests in
			// 5 s and kept every event of them: each call now stops at its
			// limits and says more is waiting, and the next goes on.
			name: "endless has_more",
			opts: &poppytest.Options{EndlessHasMore: true, AgentDelay: -1},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				first := send(t, cs, map[string]any{"text": "Hello", "wait_seconds": 0})
				id := first["conversation_id"].(string)
				seen := map[string]bool{}
				for i := range 2 {
					before := eventReads(h)
					_, got := call(t, cs, "read_events", map[string]any{"conversation_id": id, "wait_seconds": 0})
					reads := eventReads(h) - before
					if reads > 20 || got["more_waiting"] != true || !strings.Contains(got["next"].(string), "read_events") {
						t.Fatalf("call %d: %d reads, more_waiting %v, next %q; want at most 20 reads and more waiting",
							i, reads, got["more_waiting"], got["next"])
					}
					evs := events(got)
					if len(evs) == 0 || len(evs) > 500 {
						t.Fatalf("call %d: %d events, want some and at most 500", i, len(evs))
					}
					for _, e := range evs {
						key := e["at"].(string) + e["text"].(string)
						if seen[key] {
							t.Fatalf("call %d returned %q again: the next call did not go on", i, e["text"])
						}
						seen[key] = true
					}
				}
			},
		},
		{
			// A flood of text-delta pieces, each of a new message, grew the
			// heap to 505 MiB in 8 s through the progress notifications it
			// caused: what one wait shows and sends is bounded.
			name: "text-delta flood",
			opts: &poppytest.Options{AgentDelay: 200 * time.Millisecond},
			run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
				// A second session of the same client counts the notifications.
				progress := &progressLog{}
				watch := h.connectWith(t, revisions[0], &sdk.ClientOptions{ProgressNotificationHandler: progress.add})
				first := send(t, cs, map[string]any{"text": "Hello", "wait_seconds": 0})
				id := first["conversation_id"].(string)
				h.company.FloodDeltas(20000)
				res := readWithProgress(t, watch, id, 10)
				if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, "company_agent (third-party content)") {
					t.Errorf("the real reply is missing:\n%s", text)
				}
				if n := len(progress.all()); n > 100 {
					t.Errorf("%d progress notifications for one wait, want at most 100", n)
				}
			},
		},
	}
}

// eventReads counts the reads of conversation events the Company got.
func eventReads(h *harness) int {
	n := 0
	for _, r := range h.company.Requests() {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/events") {
			n++
		}
	}
	return n
}
