// Package democompany is the demo Company: the one poppy-mcp embeds for
// `serve --demo` and `poppy-mcp demo` (docs/tools.md), so a person can try
// the agent from an assistant with no Company of their own.
//
// It is poppytest's strict reference Company, run outside a test, with what
// a person trying it needs and a test never does: its test account Dana
// approves device sign-in by itself (poppytest.Options.AutoApprove), a person
// of the Company joins every handoff (HumanJoin), and the one-time codes of
// Mediated Sign-In show on an inbox page (Inbox), as the User's phone would
// show them. Its protocol-violation reports go to a log instead of failing a
// test.
//
// It is a package of its own, at the top of the module rather than under
// poppytest, because it is not part of the test library: poppytest imports
// none of the agent's packages (so that one misreading of the spec cannot
// hide on both sides), while the demo Company hands the agent its network
// guard's options (GuardOptions). Its one concern is making poppytest
// something to try; cmd/poppy-mcp only starts it and closes it.
package democompany

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// Domain is where the demo Company lives (docs/tools.md, `serve --demo`).
const Domain = "demo.poppy.example"

// JoinAfter is how long a handoff waits for the demo Company's person.
const JoinAfter = 3 * time.Second

// Company is the running demo Company. Its methods are safe for concurrent
// use.
type Company struct {
	srv    *poppytest.Server
	rep    *poppytest.Reporter
	person *HumanJoin
	// inbox serves the one-time codes the Company sends, at inboxURL, for
	// the person trying the demo.
	inbox    *http.Server
	inboxURL string
}

// Start starts the demo Company as a person trying it from an assistant
// needs it: its test account Dana approves device sign-in by itself; the
// one-time codes of its account Sam show on the Company's inbox page, served
// on loopback since demo.poppy.example resolves only inside poppy-mcp (and
// only there, never to the model: codes are secrets); and a person of the
// Company joins every handoff after JoinAfter. Violations go to logger.
func Start(logger *slog.Logger) (dc *Company, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("democompany: the inbox: %w", err)
	}
	rep := &poppytest.Reporter{Log: func(msg string) { logger.Error(msg) }}
	defer func() {
		if r := recover(); r != nil { // poppytest panics when it cannot start
			ln.Close()
			err = fmt.Errorf("democompany: starting the demo Company: %v", r)
		}
	}()
	dc = &Company{rep: rep, inboxURL: "http://" + ln.Addr().String() + InboxPath, person: &HumanJoin{After: JoinAfter}}
	accounts := dc.accounts()
	dc.srv = poppytest.NewServer(rep, &poppytest.Options{
		Domain:   Domain,
		Accounts: accounts,
		// The demo has no person to approve device sign-in on the Company's
		// page: the demo Company approves it itself, as its test account Dana,
		// a couple of seconds after the request (README says so).
		AutoApprove:    &poppytest.AutoApproval{Account: "acct_dana", After: 2 * time.Second},
		DeviceInterval: time.Second,
		OnEvent:        dc.person.Watch,
	})
	dc.person.Attend(dc.srv)
	dc.inbox = &http.Server{Handler: LoopbackOnly(ln.Addr().String(), Inbox(dc.srv, accounts)), ReadHeaderTimeout: 10 * time.Second}
	go dc.inbox.Serve(ln)
	logger.Info("the demo Company is at "+Domain+"; the one-time codes it sends show on its inbox page", "inbox", dc.inboxURL)
	return dc, nil
}

// accounts are poppytest's, the one-time codes sent to the inbox.
func (d *Company) accounts() []poppytest.Account {
	accounts := poppytest.DefaultAccounts()
	for i := range accounts {
		if accounts[i].RequiresCode {
			accounts[i].SentTo = "the demo inbox, " + d.inboxURL + " (a demo has no phone to text: open that page)"
		}
	}
	return accounts
}

// Server is the demo Company's poppytest Server.
func (d *Company) Server() *poppytest.Server { return d.srv }

// Addr is the "127.0.0.1:PORT" address of the Company's TLS listener.
func (d *Company) Addr() string { return d.srv.Addr() }

// InboxURL is the address of the inbox page, on loopback.
func (d *Company) InboxURL() string { return d.inboxURL }

// Close stops the inbox, the Company's person and the Company.
func (d *Company) Close() {
	d.inbox.Close()
	d.person.Stop()
	d.rep.Close()
}

// GuardOptions map the demo Company's names to its listener, as --resolve
// would, and trust its CA; every other address stays behind the guard.
func (d *Company) GuardOptions() *netguard.Options {
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

// Failures is how many protocol violations the Company reported so far.
func (d *Company) Failures() int { return d.rep.Failures() }
