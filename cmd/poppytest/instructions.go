package main

// This file says what a Personal Agent under test needs to reach the
// Companies: the listener, the CA file, each run's hosts with the
// --resolve mappings and curl flags that send them to the listener, its
// sign-in types and test accounts with their mediated fields, and where the
// admin API is. serve prints it on start (as text, or JSON with --json);
// GET /admin/ and each run's routes return it as JSON.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// serverInfo is what every run shares.
type serverInfo struct {
	AdminURL   string `json:"admin_url"`   // http://127.0.0.1:PORT/admin/
	OpenAPIURL string `json:"openapi_url"` // the admin API's OpenAPI document
	CAFile     string `json:"ca_file"`     // the CA, PEM: SSL_CERT_FILE, --cacert
	Addr       string `json:"addr"`        // the TLS listener, 127.0.0.1:PORT
}

// instructions are serverInfo with every run.
type instructions struct {
	serverInfo
	Runs []runInfo `json:"runs"`
}

// runInfo is what an agent needs to use one run.
type runInfo struct {
	Name      string   `json:"name"`
	Domain    string   `json:"domain"`
	Hosts     []string `json:"hosts"`      // every host the run serves now
	AgentHost string   `json:"agent_host"` // where its agent's documents are served once registered
	ClientID  string   `json:"client_id,omitempty"`
	// Resolve are --resolve values (HOST:443:127.0.0.1:PORT) that send each
	// host to the listener, as poppy-mcp takes them.
	Resolve []string `json:"resolve"`
	// CurlConnectTo is curl's --connect-to value sending every host to the
	// listener; CurlResolve are curl --resolve values (HOST:PORT:127.0.0.1)
	// for URLs that name the listener's port.
	CurlConnectTo string                     `json:"curl_connect_to"`
	CurlResolve   []string                   `json:"curl_resolve"`
	SignIn        []string                   `json:"sign_in"`
	Accounts      []accountInfo              `json:"accounts"`
	AdminURL      string                     `json:"admin_url"` // this run's admin routes
	Options       map[string]json.RawMessage `json:"options"`
	Created       time.Time                  `json:"created_at"`
}

// accountInfo is a test account and its answers to the mediated fields.
type accountInfo struct {
	ID          string            `json:"id"`
	Fields      map[string]string `json:"fields"`
	OneTimeCode bool              `json:"one_time_code"`
	SentTo      string            `json:"sent_to,omitempty"`
}

func (i *serverInfo) instructions(g *registry) instructions {
	out := instructions{serverInfo: *i, Runs: []runInfo{}}
	for _, rn := range g.list() {
		out.Runs = append(out.Runs, i.run(g, rn))
	}
	return out
}

// run describes rn as it is now.
func (i *serverInfo) run(g *registry, rn *run) runInfo {
	g.mu.Lock()
	srv, spec, sc, agentOn := rn.srv, rn.spec, rn.scenario, rn.agentOn
	g.mu.Unlock()
	host, port, _ := net.SplitHostPort(i.Addr)
	info := runInfo{Name: rn.name, Domain: srv.Domain(), AgentHost: srv.AgentHost(), ClientID: spec.ClientID,
		CurlConnectTo: "::" + i.Addr, SignIn: []string{"direct", "device", "mediated"},
		AdminURL: i.AdminURL + "runs/" + rn.name, Options: spec.Options, Created: rn.created}
	if info.Options == nil {
		info.Options = map[string]json.RawMessage{}
	}
	for _, h := range srv.Hosts() {
		if h != srv.AgentHost() || agentOn {
			info.Hosts = append(info.Hosts, h)
			info.Resolve = append(info.Resolve, h+":443:"+i.Addr)
			info.CurlResolve = append(info.CurlResolve, h+":"+port+":"+host)
		}
	}
	accounts := poppytest.DefaultAccounts()
	if sc != nil && sc.SignIn != nil {
		info.SignIn = slices.Clone(sc.SignIn)
	}
	if sc != nil && sc.Accounts != nil {
		accounts = nil
		for _, a := range sc.Accounts {
			accounts = append(accounts, a.Account())
		}
	}
	for _, a := range accounts {
		fields := a.Credentials
		if fields == nil {
			fields = map[string]string{"email": a.Email, "password": a.Password}
		}
		info.Accounts = append(info.Accounts, accountInfo{ID: a.ID, Fields: fields, OneTimeCode: a.RequiresCode, SentTo: a.SentTo})
	}
	return info
}

// writeText prints the instructions for a person.
func (in instructions) writeText(w io.Writer) {
	fmt.Fprintf(w, "poppytest serve: a strict Poppy 0.1 Company for testing Personal Agents\n\n")
	fmt.Fprintf(w, "  listener   %s (TLS; every host below)\n", in.Addr)
	fmt.Fprintf(w, "  CA         %s (SSL_CERT_FILE=%s)\n", in.CAFile, in.CAFile)
	fmt.Fprintf(w, "  admin API  %s (OpenAPI 3.1: %s)\n", in.AdminURL, in.OpenAPIURL)
	for _, r := range in.Runs {
		r.writeText(w, in.CAFile)
	}
	fmt.Fprintf(w, "\nViolations: curl -s %sviolations   (a summary prints on exit)\n", in.AdminURL)
}

func (r runInfo) writeText(w io.Writer, caFile string) {
	fmt.Fprintf(w, "\nrun %s: Company %s (admin: %s)\n", r.Name, r.Domain, r.AdminURL)
	fmt.Fprintf(w, "  hosts      %s\n", strings.Join(r.Hosts, " "))
	if r.ClientID != "" {
		fmt.Fprintf(w, "  agent      serves only %s\n", r.ClientID)
	}
	fmt.Fprintf(w, "  agent docs at https://%s once registered: curl -X PUT -H 'Content-Type: application/json' \\\n", r.AgentHost)
	fmt.Fprintf(w, "               -d '{\"client\": AGENT_JSON, \"jwks\": JWKS_JSON}' %s/agent\n", r.AdminURL)
	fmt.Fprintf(w, "  poppy-mcp  SSL_CERT_FILE=%s poppy-mcp serve", caFile)
	for _, v := range r.Resolve {
		fmt.Fprintf(w, " --resolve %s", v)
	}
	fmt.Fprintf(w, "\n  curl       curl --cacert %s --connect-to %s https://%s/.well-known/poppy.json\n", caFile, r.CurlConnectTo, r.Domain)
	fmt.Fprintf(w, "  sign-in    %s\n", strings.Join(r.SignIn, " "))
	for i, a := range r.Accounts {
		label := "  accounts  "
		if i > 0 {
			label = "            "
		}
		names := make([]string, 0, len(a.Fields))
		for k := range a.Fields {
			names = append(names, k)
		}
		slices.Sort(names)
		var fields []string
		for _, k := range names {
			fields = append(fields, k+"="+a.Fields[k])
		}
		fmt.Fprintf(w, "%s %s  %s", label, a.ID, strings.Join(fields, " "))
		if a.OneTimeCode {
			fmt.Fprintf(w, "  (one-time code: GET %s/codes)", r.AdminURL)
		}
		fmt.Fprintln(w)
	}
}

// knobList is every option and fault, for GET /admin/knobs.
func knobList() map[string]any {
	opts := []map[string]any{}
	for _, o := range options {
		opts = append(opts, map[string]any{"name": o.name, "type": o.typ, "doc": o.doc})
	}
	fs := []map[string]any{}
	for _, f := range faults {
		params := []map[string]any{}
		for _, p := range f.params {
			params = append(params, map[string]any{"name": p.name, "type": p.typ, "required": p.required, "doc": p.doc})
		}
		fs = append(fs, map[string]any{"name": f.name, "doc": f.doc, "params": params})
	}
	return map[string]any{"options": opts, "faults": fs}
}
