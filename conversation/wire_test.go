package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestWireGolden records what the agent sends, as the Company receives it:
// method, path, query, the headers of the conversation protocol, and the
// body. IDs chosen at random are replaced by stable names.
func TestWireGolden(t *testing.T) {
	co := newCompany(t, nil, &poppytest.Options{NoNonce: true}) // the DPoP nonce retry is auth's, not this wire
	tr := co.tracker(t)
	ctx := context.Background()
	yes := true
	u, err := tr.Start(ctx, Message{Sender: SenderAgent, Text: "The jacket from order #1042 isn't warm enough.",
		Context: &Context{Locale: "en-US", TimeZone: "America/Los_Angeles", UserAvailable: &yes}}, "", &ReadOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error {
			_, err := tr.Send(ctx, u.ConversationID, Message{Sender: SenderHuman, Text: "Medium, please.",
				Data: json.RawMessage(`{"size":"M"}`)}, &ReadOptions{Wait: 5 * time.Second})
			return err
		},
		func() error {
			_, err := tr.Read(ctx, u.ConversationID, &ReadOptions{Wait: time.Second, Stream: true})
			return err
		},
		func() error { _, err := tr.Handoff(ctx, u.ConversationID); return err },
		func() error {
			_, err := tr.Start(ctx, Message{Sender: SenderHuman, Text: "Hi"}, u.ConversationID, nil)
			return err
		},
		func() error { _, err := tr.Close(ctx, u.ConversationID); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	for _, r := range co.srv.Requests() {
		if r.Host != "api."+co.srv.Domain() {
			continue
		}
		fmt.Fprintf(&b, "%s %s?%s\n", r.Method, r.Path, r.RawQuery)
		for _, h := range []string{"Accept", "Content-Type", "Last-Event-ID"} {
			if v := r.Header.Get(h); v != "" {
				fmt.Fprintf(&b, "%s: %s\n", h, v)
			}
		}
		if len(r.Body) > 0 {
			fmt.Fprintf(&b, "%s\n", r.Body)
		}
		b.WriteString("\n")
	}
	golden.Check(t, "testdata/wire.golden", []byte(stableIDs(b.String())))
}

var idPattern = regexp.MustCompile(`\b(msg|cnv|evt)_[A-Za-z0-9_-]+`)

// stableIDs names each random ID by its kind and order of appearance.
func stableIDs(s string) string {
	names := map[string]string{}
	count := map[string]int{}
	return idPattern.ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		kind := id[:3]
		count[kind]++
		names[id] = fmt.Sprintf("%s_%d", kind, count[kind])
		return names[id]
	})
}
