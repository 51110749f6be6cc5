package main

// This file is poppytest serve: it starts the Front (the one TLS listener
// and CA), the default run and the admin API, prints the instructions, and
// on SIGINT, SIGTERM or POST /admin/shutdown prints a summary of the
// violations and exits, non-zero with --fail-on-violation if there were any.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// serveFlags are serve's flags.
type serveFlags struct {
	addr, admin, caOut, domain, clientID, scenario string
	agentCAs                                       []string
	options                                        map[string]json.RawMessage
	json, failOnViolation                          bool
}

// parseServeFlags reads serve's command line.
func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{options: map[string]json.RawMessage{}}
	fs := flag.NewFlagSet("poppytest serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:0", "the TLS `address` every Company host is served on (loopback only)")
	fs.StringVar(&f.admin, "admin", "127.0.0.1:0", "the admin API's `address` (loopback only)")
	fs.StringVar(&f.caOut, "ca-out", "", "write the CA certificate (PEM) to `FILE`; default a file in a temporary directory, removed on exit")
	fs.StringVar(&f.domain, "domain", "", "the default run's `domain`; default the scenario's, else example.com")
	fs.StringVar(&f.clientID, "client-id", "", "bind the default run to the agent at this client_id `URL`")
	fs.StringVar(&f.scenario, "scenario", "", "shape the default run's Company with this JSON or YAML `FILE`")
	fs.Func("agent-ca", "trust the CA in `FILE` (PEM) when fetching agents' documents from their own servers (repeatable)", func(v string) error {
		f.agentCAs = append(f.agentCAs, v)
		return nil
	})
	fs.Func("option", "set an option of the default run, `NAME=VALUE` (repeatable; GET /admin/knobs lists them)", func(v string) error {
		return parseOptionFlag(v, f.options)
	})
	fs.BoolVar(&f.json, "json", false, "print the instructions, and the summary on exit, as JSON on stdout")
	fs.BoolVar(&f.failOnViolation, "fail-on-violation", false, "exit 1 if an agent committed any protocol violation")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, a := range []struct{ name, addr string }{{"--addr", f.addr}, {"--admin", f.admin}} {
		if err := checkLoopback(a.addr); err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
	}
	return f, nil
}

// checkLoopback refuses an address that is not on loopback.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q is not a loopback address: poppytest serves this machine only", addr)
	}
	return nil
}

// serve runs poppytest serve until a signal, or until stop is closed.
func serve(args []string, stdout, stderr io.Writer, stop <-chan struct{}) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "poppytest serve:", err)
		return exitUsage
	}
	s, err := start(f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "poppytest serve:", strings.TrimPrefix(err.Error(), "poppytest: "))
		return exitUsage
	}
	s.printInstructions(stdout)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
	case <-s.shutdown:
	case <-stop:
	}
	return s.finish(stdout, stderr)
}

// server is a running poppytest serve.
type server struct {
	flags    *serveFlags
	front    *poppytest.Front
	reg      *registry
	info     *serverInfo
	admin    *http.Server
	tempDir  string        // removed on exit; "" with --ca-out
	shutdown chan struct{} // closed by POST /admin/shutdown
}

// start starts the Front, the default run and the admin API.
func start(f *serveFlags, stderr io.Writer) (*server, error) {
	var sc *poppytest.Scenario
	if f.scenario != "" {
		b, err := os.ReadFile(f.scenario)
		if err != nil {
			return nil, err
		}
		if sc, err = poppytest.ParseScenario(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.scenario, err)
		}
	}
	front, err := poppytest.NewFront(&poppytest.FrontOptions{Addr: f.addr})
	if err != nil {
		return nil, err
	}
	s := &server{flags: f, front: front, shutdown: make(chan struct{})}
	if err := s.startRest(sc, stderr); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *server) startRest(sc *poppytest.Scenario, stderr io.Writer) error {
	caFile, err := s.writeCA()
	if err != nil {
		return err
	}
	agentClient, err := agentClient(s.front, s.flags.agentCAs)
	if err != nil {
		return err
	}
	s.reg = &registry{front: s.front, agentClient: agentClient, scenario: sc, runs: map[string]*run{},
		log: log.New(stderr, "", log.LstdFlags)}
	ln, err := net.Listen("tcp", s.flags.admin)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	origin := "http://" + ln.Addr().String()
	s.info = &serverInfo{AdminURL: origin + "/admin/", OpenAPIURL: origin + "/admin/openapi.json", CAFile: caFile, Addr: s.front.Addr()}
	domain := s.flags.domain
	if domain == "" && (sc == nil || sc.Domain == "") {
		domain = "example.com"
	}
	if _, err := s.reg.create(runSpec{Name: "default", Domain: domain, ClientID: s.flags.clientID, Options: s.flags.options}); err != nil {
		ln.Close()
		return fmt.Errorf("the default run: %w", err)
	}
	doc, err := openAPIDocument(origin)
	if err != nil {
		ln.Close()
		return err
	}
	a := &admin{reg: s.reg, info: s.info, doc: doc, shutdown: s.requestShutdown}
	s.admin = &http.Server{Handler: newAdminMux(a), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = s.admin.Serve(ln) }()
	return nil
}

// writeCA writes the Front's CA where --ca-out says, or in a new
// temporary directory.
func (s *server) writeCA() (string, error) {
	path := s.flags.caOut
	if path == "" {
		dir, err := os.MkdirTemp("", "poppytest-")
		if err != nil {
			return "", err
		}
		s.tempDir = dir
		path = filepath.Join(dir, "ca.pem")
	}
	if err := os.WriteFile(path, s.front.CAPEM(), 0o644); err != nil {
		return "", fmt.Errorf("writing the CA: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path, nil
	}
	return abs, nil
}

// agentClient fetches agents' documents: hosts a run serves from the
// Front, others from the network, trusting the system's CAs, the Front's
// and those in caFiles.
func agentClient(front *poppytest.Front, caFiles []string) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pool.AppendCertsFromPEM(front.CAPEM())
	for _, file := range caFiles {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--agent-ca: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--agent-ca %s: no PEM certificate in it", file)
		}
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.TLSClientConfig.RootCAs = pool
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && front.Serves(host) {
			addr = front.Addr()
		}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr}, nil
}

func (s *server) requestShutdown() {
	select {
	case <-s.shutdown:
	default:
		close(s.shutdown)
	}
}

func (s *server) printInstructions(w io.Writer) {
	in := s.info.instructions(s.reg)
	if s.flags.json {
		b, _ := json.Marshal(in)
		fmt.Fprintln(w, string(b))
		return
	}
	in.writeText(w)
}

// finish stops everything, prints the summary and returns the exit code.
func (s *server) finish(stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.admin.Shutdown(ctx)
	all := s.reg.closeAll()
	s.close()
	printSummary(stderr, all)
	if s.flags.json {
		b, _ := json.Marshal(map[string]any{"violations": nonNil(all)})
		fmt.Fprintln(stdout, string(b))
	}
	if s.flags.failOnViolation && len(all) > 0 {
		return exitViolation
	}
	return exitOK
}

func (s *server) close() {
	s.front.Close()
	if s.tempDir != "" {
		os.RemoveAll(s.tempDir)
	}
}

// printSummary says how many violations each run had, by section, and
// lists them.
func printSummary(w io.Writer, all []runViolation) {
	if len(all) == 0 {
		fmt.Fprintln(w, "poppytest: no protocol violations")
		return
	}
	fmt.Fprintf(w, "poppytest: %d protocol violation(s):\n", len(all))
	for _, v := range all {
		req := strings.TrimSpace(v.Request.Method + " " + v.Request.Host + v.Request.Path)
		fmt.Fprintf(w, "  run %s #%d §%s %s", v.Run, v.Seq, v.Section, v.Rule)
		if v.Code != "" {
			fmt.Fprintf(w, " (answered %s)", v.Code)
		}
		if req != "" {
			fmt.Fprintf(w, " [%s]", req)
		}
		fmt.Fprintln(w)
	}
}
