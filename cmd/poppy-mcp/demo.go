package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// runDemo walks through what poppy-mcp can do against the embedded demo
// Company, through a real MCP client in the same process, printing each step.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var c common
	c.register(fs)
	if !parse(fs, args, stderr) || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: poppy-mcp demo [flags]")
		return 2
	}
	c.logLevel = orDefault(c.logLevel, "warn")
	logger, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp:", err)
		return 2
	}
	a, err := newApp(ctx, &c, true, logger)
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
	if n := a.demo.rep.violations(); n > 0 {
		fmt.Fprintf(stderr, "poppy-mcp demo: the demo Company reported %d protocol violation(s)\n", n)
		return 1
	}
	fmt.Fprintln(stdout, "\nDone: every step above ran against the embedded Company with no protocol violation.")
	return 0
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
}

func (w *walk) say(format string, args ...any) {
	w.step++
	fmt.Fprintf(w.out, "\n%d. %s\n", w.step, fmt.Sprintf(format, args...))
}

func (w *walk) run(ctx context.Context, a *app) error {
	w.say("Start the embedded demo Company (poppytest) at %s, on %s.", demoDomain, a.demo.srv.Addr())
	cl, err := client.NewInProcessClient(a.tools.MCP())
	if err != nil {
		return err
	}
	defer cl.Close()
	w.mcp = cl
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
	w.say("Discover the Company: poppy.json, its OAuth server metadata, and its MCP server's resource metadata, each rule checked.")
	if err := w.call(ctx, "discover_company", map[string]any{"domain": demoDomain}); err != nil {
		return err
	}
	w.say("Open a Session: a signed jwt-bearer assertion, a client assertion and a DPoP proof go to the token endpoint; the Session Token stays inside poppy-mcp.")
	return w.call(ctx, "start_session", map[string]any{"domain": demoDomain})
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

// call calls a tool and prints its text result.
func (w *walk) call(ctx context.Context, name string, args map[string]any) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	fmt.Fprintf(w.out, "   → %s %v\n", name, args)
	res, err := w.mcp.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			fmt.Fprintf(w.out, "   ← %s\n", t.Text)
		}
	}
	if res.IsError {
		return fmt.Errorf("%s failed", name)
	}
	return nil
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}
