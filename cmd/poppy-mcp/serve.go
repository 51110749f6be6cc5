package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// runServe serves MCP over stdio. Logs go to stderr only: stdout carries MCP.
func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c common
	c.register(fs)
	demo := fs.Bool("demo", false, "serve with the embedded demo Company at "+demoDomain)
	if !parse(fs, args, stderr) || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: poppy-mcp serve [--demo] [flags]")
		return 2
	}
	logger, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp:", err)
		return 2
	}
	app, err := newApp(ctx, &c, *demo, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	defer app.close()
	stdio := server.NewStdioServer(app.tools.MCP())
	stdio.SetErrorLogger(log.New(stderr, "poppy-mcp: ", 0))
	logger.Info("serving MCP over stdio", "demo", *demo)
	if err := stdio.Listen(ctx, stdin, stdout); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		logger.Error("stdio", "err", err)
		return 1
	}
	return 0
}

// app is one running Personal Agent: the tools over the protocol packages,
// and the embedded demo Company when asked for.
type app struct {
	tools *tools.Server
	demo  *demoCompany
}

func newApp(ctx context.Context, c *common, demo bool, logger *slog.Logger) (*app, error) {
	a := &app{}
	var base http.RoundTripper = c.transport()
	if demo {
		dc, err := startDemoCompany(logger)
		if err != nil {
			return nil, err
		}
		a.demo = dc
		base = dc.srv.Transport()
	}
	a.tools = tools.New(tools.Deps{
		Discovery: discovery.New(documentClient(base), nil),
		Logger:    logger,
	})
	return a, nil
}

func (a *app) close() {
	if a.demo != nil {
		a.demo.close()
	}
}
