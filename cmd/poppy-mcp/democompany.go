package main

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// demoDomain is where the embedded demo Company lives (docs/tools.md, `serve --demo`).
const demoDomain = "demo.poppy.example"

// demoCompany is poppytest run outside a test: its protocol-violation reports
// go to the log instead of failing a test.
type demoCompany struct {
	srv *poppytest.Server
	rep *poppytest.Reporter
}

func startDemoCompany(logger *slog.Logger) (dc *demoCompany, err error) {
	rep := &poppytest.Reporter{Log: func(msg string) { logger.Error(msg) }}
	defer func() {
		if r := recover(); r != nil { // poppytest panics when it cannot start
			err = fmt.Errorf("starting the demo Company: %v", r)
		}
	}()
	srv := poppytest.NewServer(rep, &poppytest.Options{
		Domain: demoDomain,
		// The demo has no person to approve device sign-in on the Company's
		// page: the demo Company approves it itself, as its test account Dana,
		// a couple of seconds after the request (README says so).
		AutoApprove:    &poppytest.AutoApproval{Account: "acct_dana", After: 2 * time.Second},
		DeviceInterval: time.Second,
	})
	return &demoCompany{srv: srv, rep: rep}, nil
}

func (d *demoCompany) close() { d.rep.Close() }

// guardOptions map the demo Company's names to its listener, as --resolve
// would, and trust its CA; every other address stays behind the guard.
func (d *demoCompany) guardOptions() *netguard.Options {
	return &netguard.Options{
		Resolve: func(hostport string) (string, bool) {
			host, _, err := net.SplitHostPort(hostport)
			if err != nil || !slices.Contains(d.srv.Hosts(), host) {
				return "", false
			}
			return d.srv.Addr(), true
		},
		RootCAs: d.srv.CertPool(),
	}
}
