// Package textonly is for tests: an MCP client as many are, one that
// passes the model only a tool result's text content, and what a model
// would read out of that text.
package textonly

import (
	"context"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// NewClient is a go-sdk client that deletes structuredContent from every
// tools/call result before anything reads it.
func NewClient(name string, opts *sdk.ClientOptions) *sdk.Client {
	c := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, opts)
	c.AddSendingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*sdk.CallToolResult); ok {
				r.StructuredContent = nil
			}
			return res, err
		}
	})
	return c
}

// Text is all the text content of res, in order.
func Text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// What a model reads out of poppy-mcp's text: a device sign-in's user code,
// a one-time local page (a sign-in page or a join_url), a conversation ID.
var (
	UserCode       = regexp.MustCompile(`enter the code ([A-Z0-9-]+)`)
	LocalPage      = regexp.MustCompile(`(http://127\.0\.0\.1:\d+/p/[A-Za-z0-9_-]+)`)
	SignInPage     = regexp.MustCompile(`Show the user the link ` + LocalPage.String())
	ConversationID = regexp.MustCompile(`"conversation_id":"([^"]+)"`)
)

// Find is the first submatch of re in text, or fails the test.
func Find(t testing.TB, what string, re *regexp.Regexp, text string) string {
	t.Helper()
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in the text:\n%s", what, text)
	}
	return m[1]
}
