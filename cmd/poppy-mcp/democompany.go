package main

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// demoDomain is where the embedded demo Company lives (TOOLS.md `serve --demo`).
const demoDomain = "demo.poppy.example"

// demoCompany is poppytest run outside a test: its protocol-violation reports
// go to the log instead of failing a test.
type demoCompany struct {
	srv *poppytest.Server
	rep *demoReporter
}

func startDemoCompany(logger *slog.Logger) (dc *demoCompany, err error) {
	rep := &demoReporter{log: logger}
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

func (d *demoCompany) close() { d.rep.cleanup() }

// demoReporter implements poppytest.T for the demo.
type demoReporter struct {
	log *slog.Logger

	mu       sync.Mutex
	cleanups []func() // guarded by mu
	errors   int      // guarded by mu
}

func (r *demoReporter) Helper() {}

func (r *demoReporter) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.errors++
	r.mu.Unlock()
	r.log.Error(fmt.Sprintf(format, args...))
}

func (r *demoReporter) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *demoReporter) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// violations is how many protocol violations the demo Company reported.
func (r *demoReporter) violations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}
