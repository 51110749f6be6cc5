package main

// This file wires the App (package app) the commands serve and demo run:
// the shared flags become app.Options, and with --demo the embedded demo
// Company starts first. It is the one place the binary hands the demo
// Company to an App.

import (
	"context"
	"io"
	"log/slog"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/democompany"
)

// running is an App and the demo Company it serves with, if any.
type running struct {
	*app.App
	demo *democompany.Company // nil without --demo
}

// newApp starts the App o describes, with the demo Company when demo is set.
func newApp(ctx context.Context, o app.Options, demo bool) (*running, error) {
	r := &running{}
	if demo {
		dc, err := democompany.Start(o.Logger)
		if err != nil {
			return nil, err
		}
		r.demo = dc
		srv := dc.Server()
		o.Demo = &app.Demo{Guard: dc.GuardOptions(), ClientID: "https://" + srv.AgentHost() + "/agent.json",
			CAPEM: srv.CAPEM(), Publish: srv.SetAgentDocuments}
	}
	a, err := app.New(ctx, o)
	if err != nil {
		r.close()
		return nil, err
	}
	r.App = a
	return r, nil
}

// close stops the App, then the demo Company.
func (r *running) close() {
	if r.App != nil {
		r.App.Close()
	}
	if r.demo != nil {
		r.demo.Close()
	}
}

// appOptions are the App's options from the shared flags; HTTP mode's
// are serve's to add.
func (c *common) appOptions(logger *slog.Logger, stderr io.Writer) app.Options {
	return app.Options{
		State: c.state(), ClientID: c.clientID, Resolve: c.resolve.lookup, PagesAddr: c.pagesAddr,
		Browser: c.browser, ReadOnly: c.tools.readOnly, Toolsets: c.tools.toolsets, EvictIdle: c.evictIdle, Metrics: c.metrics,
		Logger: logger, Stderr: stderr, Version: version,
	}
}
