package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/democompany"
)

// runDemo walks through what poppy-mcp can do against the embedded demo
// Company, through a real MCP client in the same process, printing each step.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	c := demoFlags(fs)
	if !parse(fs, args, stderr) || fs.NArg() > 0 {
		return usageError(stderr, "demo")
	}
	c.logLevel = orDefault(c.logLevel, "warn")
	logger, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp:", err)
		return 2
	}
	a, err := newApp(ctx, c.appOptions(logger, nil), true)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp demo:", err)
		return 1
	}
	defer a.close()
	w := &walk{out: stdout}
	if err := w.run(ctx, a); err != nil {
		fmt.Fprintln(stderr, "poppy-mcp demo:", err)
		return 1
	}
	if n := a.demo.Failures(); n > 0 {
		fmt.Fprintf(stderr, "poppy-mcp demo: the demo Company reported %d protocol violation(s)\n", n)
		return 1
	}
	fmt.Fprintln(stdout, "\nDone: every step above ran against the embedded Company with no protocol violation.")
	return 0
}

// demoFlags registers demo's flags on fs: the shared ones.
func demoFlags(fs *flag.FlagSet) *common {
	var c common
	c.register(fs)
	return &c
}

func orDefault(v, def string) string {
	if v == "" || v == "info" {
		return def
	}
	return v
}

// walk prints numbered steps.
type walk struct {
	out  io.Writer
	step int
	mcp  *client.Client

	conversation string // the conversation the walk holds
}

func (w *walk) say(format string, args ...any) {
	w.step++
	fmt.Fprintf(w.out, "\n%d. %s\n", w.step, fmt.Sprintf(format, args...))
}

func (w *walk) run(ctx context.Context, a *running) error {
	w.say("Start the embedded demo Company (poppytest) at %s, on %s; the one-time codes it sends show at %s.", demoDomain, a.demo.Addr(), a.demo.InboxURL())
	cl, err := client.NewInProcessClient(a.Tools().MCP())
	if err != nil {
		return err
	}
	defer cl.Close()
	w.mcp = cl
	cl.OnNotification(w.progress)
	if err := cl.Start(ctx); err != nil {
		return err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "poppy-mcp demo", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		return err
	}
	if err := w.listTools(ctx); err != nil {
		return err
	}
	steps := []func(context.Context, *running) error{w.discover, w.converse, w.signIn, w.handoff, w.api, w.relay, w.website, w.signOut}
	for _, step := range steps {
		if err := step(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

func (w *walk) discover(ctx context.Context, _ *running) error {
	w.say("Discover the Company: poppy.json, its OAuth server metadata, and its MCP server's resource metadata, each rule checked.")
	if _, err := w.call(ctx, "discover_company", map[string]any{"domain": demoDomain}); err != nil {
		return err
	}
	w.say("Open a Session: a signed jwt-bearer assertion, a client assertion and a DPoP proof go to the token endpoint; the Session Token stays inside poppy-mcp.")
	_, err := w.call(ctx, "start_session", map[string]any{"domain": demoDomain})
	return err
}

// converse talks with the Company Agent until it asks for sign-in.
func (w *walk) converse(ctx context.Context, _ *running) error {
	w.say("Talk with the Company Agent. poppy-mcp makes the message IDs, keeps the cursor and retries safely.")
	res, err := w.call(ctx, "send_message", map[string]any{"domain": demoDomain, "text": "Hello",
		"context": map[string]any{"locale": "en-US", "time_zone": "America/Los_Angeles", "user_available": true}, "wait_seconds": 10})
	if err != nil {
		return err
	}
	w.conversation, _ = res["conversation_id"].(string)
	w.say("Ask about an order: that needs the user's account, so the Company Agent asks for sign-in with an authorization event.")
	_, err = w.call(ctx, "send_message", map[string]any{"domain": demoDomain, "conversation_id": w.conversation,
		"text": "What is the status of order 1042?", "wait_seconds": 10})
	return err
}

// signIn signs in with Device Sign-In and continues the conversation signed in.
func (w *walk) signIn(ctx context.Context, _ *running) error {
	w.say("Sign in with Device Sign-In. The user would open the link and enter the code; the demo Company approves by itself as its test account Dana.")
	if _, err := w.call(ctx, "sign_in_device", map[string]any{"domain": demoDomain, "scopes": []string{"poppy:read", "poppy:write"}}); err != nil {
		return err
	}
	w.say("Wait for the sign-in (poppy-mcp polls in the background; the Account Token is stored encrypted and never shown).")
	if _, err := w.call(ctx, "sign_in_status", map[string]any{"domain": demoDomain, "wait_seconds": 15}); err != nil {
		return err
	}
	w.say("Continue the same conversation, now signed in.")
	_, err := w.call(ctx, "send_message", map[string]any{"domain": demoDomain, "conversation_id": w.conversation,
		"text": "The user has signed in. What is the status of order 1042?", "wait_seconds": 10})
	return err
}

// handoff asks for a person; the demo Company's person joins by themself
// after a few seconds, as under `serve --demo`, and writes.
func (w *walk) handoff(ctx context.Context, _ *running) error {
	w.say("Ask for a person at the Company (handoff). The conversation is queued until someone joins; at the demo Company a person joins after %s.", democompany.JoinAfter)
	if _, err := w.call(ctx, "request_human", map[string]any{"conversation_id": w.conversation}); err != nil {
		return err
	}
	w.say("Wait for the person: read the new events until responder is human and the person writes.")
	for range 4 {
		res, err := w.call(ctx, "read_events", map[string]any{"conversation_id": w.conversation, "wait_seconds": 10})
		if err != nil || res["responder"] == "human" {
			return err
		}
	}
	return fmt.Errorf("no person joined the handoff")
}

// website gives the agent's own browser a one-time page that joins the Session.
func (w *walk) website(ctx context.Context, _ *running) error {
	w.say("Browse the website in the same Session: poppy-mcp gives its own browser a one-time local page that posts a fresh browser assertion to the Company (never to the user's browser).")
	res, err := w.call(ctx, "open_website", map[string]any{"domain": demoDomain, "url": "/orders"})
	if err != nil {
		return err
	}
	fmt.Fprintf(w.out, "   (Opening %v within a minute lands on /orders signed in as this Session; a second open answers 410 Gone.)\n", res["join_url"])
	return nil
}

// api lists and calls the Company's OpenAPI operations through the Session.
func (w *walk) api(ctx context.Context, _ *running) error {
	w.say("Find an operation of the Company's OpenAPI API (a large API stays behind these three tools; a small one also gets a tool per operation).")
	if _, err := w.call(ctx, "list_api_operations", map[string]any{"domain": demoDomain, "query": "orders"}); err != nil {
		return err
	}
	w.say("Call it: the request goes out with the DPoP-bound Session Token, signed in, so it sees the user's orders.")
	_, err := w.call(ctx, "call_api", map[string]any{"domain": demoDomain, "operation": "listOrders"})
	return err
}

// relay calls a tool of the Company's MCP server, relayed by poppy-mcp with
// a Bearer Session Token issued for that server alone.
func (w *walk) relay(ctx context.Context, _ *running) error {
	w.say("Use the Company's own MCP server: its tools are relayed under a per-Company prefix, with a Bearer Session Token issued for that server only (Poppy 0.1 §4.3).")
	_, err := w.call(ctx, "demo_poppy_example_mcp_search_products", map[string]any{"query": "stormline"})
	return err
}

func (w *walk) signOut(ctx context.Context, _ *running) error {
	w.say("Close the conversation (it used the account, so it is closed while still signed in).")
	if _, err := w.call(ctx, "close_conversation", map[string]any{"conversation_id": w.conversation}); err != nil {
		return err
	}
	w.say("Sign out: poppy-mcp revokes the Account Token (RFC 7009) and the Session continues signed out.")
	_, err := w.call(ctx, "sign_out", map[string]any{"domain": demoDomain})
	return err
}

func (w *walk) listTools(ctx context.Context) error {
	w.say("Connect an MCP client to poppy-mcp and list its tools.")
	res, err := w.mcp.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	for _, t := range res.Tools {
		fmt.Fprintf(w.out, "   - %s: %s\n", t.Name, firstSentence(t.Description))
	}
	return nil
}

// call calls a tool, prints its text result and returns its structured content.
func (w *walk) call(ctx context.Context, name string, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: name} // waits report progress
	fmt.Fprintf(w.out, "   → %s %v\n", name, args)
	res, err := w.mcp.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			fmt.Fprintf(w.out, "   ← %s\n", indent(t.Text))
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("%s failed", name)
	}
	structured, _ := res.StructuredContent.(map[string]any)
	if structured == nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &structured)
	}
	return structured, nil
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n     ") }

// progress prints the progress notifications a tool sends while it waits.
func (w *walk) progress(n mcp.JSONRPCNotification) {
	if n.Method != "notifications/progress" {
		return
	}
	msg, _ := n.Params.AdditionalFields["message"].(string)
	if msg == "" {
		msg = fmt.Sprintf("%v", n.Params.AdditionalFields["progress"])
	}
	fmt.Fprintf(w.out, "     … %s\n", msg)
}

// firstSentence is the first sentence of a tool description: up to the
// first ". " that ends a sentence, not one that ends an abbreviation such as
// "e.g." inside it.
func firstSentence(s string) string {
	for from := 0; ; {
		i := strings.Index(s[from:], ". ")
		if i < 0 {
			return s
		}
		end := from + i + 1
		if !endsAbbreviation(s[:end]) {
			return s[:end]
		}
		from = end
	}
}

// endsAbbreviation reports whether s, which ends in ".", ends with an
// abbreviation that does not end a sentence.
func endsAbbreviation(s string) bool {
	for _, a := range []string{"e.g.", "i.e.", "cf.", "vs."} {
		if rest, ok := strings.CutSuffix(s, a); ok && (rest == "" || !unicode.IsLetter(rune(rest[len(rest)-1]))) {
			return true
		}
	}
	return false
}
