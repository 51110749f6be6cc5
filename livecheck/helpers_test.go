package livecheck_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// reporter is a poppytest.Reporter that keeps the violations the Company
// records about the probes, which break rules on purpose, instead of
// failing the test.
type reporter struct {
	poppytest.Reporter

	mu    sync.Mutex
	viols []string // guarded by mu
}

func newReporter(t *testing.T) *reporter {
	r := &reporter{}
	r.Log = func(msg string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.viols = append(r.viols, msg)
	}
	t.Cleanup(r.Close)
	return r
}

func (r *reporter) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.viols...)
}

// company starts a poppytest Company with opts and publishes a fresh
// agent identity on it; it returns a Checker for that identity.
func company(t *testing.T, opts *poppytest.Options, lo *livecheck.Options) (*poppytest.Server, *reporter, *livecheck.Checker) {
	t.Helper()
	rep := newReporter(t)
	srv := poppytest.NewServer(rep, opts)
	id, err := auth.NewIdentity(context.Background(), "https://"+srv.AgentHost()+"/agent.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	srv.SetAgentDocuments(agentJSON, jwks)
	o := livecheck.Options{}
	if lo != nil {
		o = *lo
	}
	o.Transport = srv.Transport()
	return srv, rep, livecheck.New(id, &o)
}

// byID indexes a report's checks.
func byID(rep *livecheck.Report) map[string]livecheck.Check {
	m := map[string]livecheck.Check{}
	for _, c := range rep.Checks {
		m[c.ID] = c
	}
	return m
}

func dump(rep *livecheck.Report) string {
	var b strings.Builder
	for _, c := range rep.Checks {
		b.WriteString(c.ID + " " + string(c.Status) + " " + c.Message + "\n")
	}
	return b.String()
}
