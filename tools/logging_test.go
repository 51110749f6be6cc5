package tools_test

import (
	"context"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLoggingNotifications: log notifications reach a client at the level it
// asked for, and not below it.
func TestLoggingNotifications(t *testing.T) {
	h := newHarness(t, nil)
	var mu sync.Mutex
	var got []*sdk.LoggingMessageParams
	cs := h.connectWith(t, revisions[0], &sdk.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			mu.Lock()
			got = append(got, r.Params)
			mu.Unlock()
		},
	})
	ctx := context.Background()
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("got %d log notifications, want 1 (none at level error, one info at debug): %+v", len(got), got)
	}
	if got[0].Level != "info" || got[0].Logger != "poppy-mcp" {
		t.Errorf("notification = %+v", got[0])
	}
}
