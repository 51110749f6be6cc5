package main

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

// demoDomain is where the embedded demo Company lives (docs/tools.md, `serve --demo`).
const demoDomain = "demo.poppy.example"

// demoJoinAfter is how long a handoff waits for the demo Company's person.
const demoJoinAfter = 3 * time.Second

// demoCompany is poppytest run outside a test: its protocol-violation reports
// go to the log instead of failing a test.
type demoCompany struct {
	srv *poppytest.Server
	rep *poppytest.Reporter
	// inbox serves the one-time codes the demo Company sends, at inboxURL,
	// for the person trying the demo (poppytest's InboxHandler).
	inbox    *http.Server
	inboxURL string
}

// startDemoCompany starts the demo Company as a person trying it from an
// assistant needs it: its test account Dana approves device sign-in by
// itself; the one-time codes of its account Sam show on a page of the demo
// Company, the inbox, served on loopback since demo.poppy.example resolves
// only inside poppy-mcp (and only there, never to the model: codes are
// secrets); and a person of the Company joins every handoff.
func startDemoCompany(logger *slog.Logger) (dc *demoCompany, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the demo inbox: %w", err)
	}
	inboxURL := "http://" + ln.Addr().String() + demoInboxPath
	rep := &poppytest.Reporter{Log: func(msg string) { logger.Error(msg) }}
	defer func() {
		if r := recover(); r != nil { // poppytest panics when it cannot start
			ln.Close()
			err = fmt.Errorf("starting the demo Company: %v", r)
		}
	}()
	accounts := poppytest.DefaultAccounts()
	for i := range accounts {
		if accounts[i].RequiresCode {
			accounts[i].SentTo = "the demo inbox, " + inboxURL + " (a demo has no phone to text: open that page)"
		}
	}
	srv := poppytest.NewServer(rep, &poppytest.Options{
		Domain:   demoDomain,
		Accounts: accounts,
		// The demo has no person to approve device sign-in on the Company's
		// page: the demo Company approves it itself, as its test account Dana,
		// a couple of seconds after the request (README says so).
		AutoApprove:    &poppytest.AutoApproval{Account: "acct_dana", After: 2 * time.Second},
		DeviceInterval: time.Second,
		HumanJoins:     &poppytest.HumanJoin{After: demoJoinAfter},
	})
	dc = &demoCompany{srv: srv, rep: rep, inboxURL: inboxURL}
	dc.inbox = &http.Server{Handler: loopbackOnly(ln.Addr().String(), srv.InboxHandler()), ReadHeaderTimeout: 10 * time.Second}
	go dc.inbox.Serve(ln)
	logger.Info("the demo Company is at "+demoDomain+"; the one-time codes it sends show on its inbox page", "inbox", inboxURL)
	return dc, nil
}

// demoInboxPath is the inbox page's path.
const demoInboxPath = "/demo/inbox"

// loopbackOnly serves h at demoInboxPath to requests whose Host is addr
// (or localhost at its port), so that no other site's page can read it
// through a name that resolves to 127.0.0.1 (DNS rebinding).
func loopbackOnly(addr string, h http.Handler) http.Handler {
	_, port, _ := net.SplitHostPort(addr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != addr && r.Host != "localhost:"+port {
			http.Error(w, "poppy-mcp: this page answers only at "+addr, http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path != demoInboxPath {
			http.Redirect(w, r, demoInboxPath, http.StatusSeeOther)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (d *demoCompany) close() {
	d.inbox.Close()
	d.rep.Close()
}

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
