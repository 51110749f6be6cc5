package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// startInProcess starts poppytest serve in the test's process with args,
// stopped when the test ends.
func startInProcess(t *testing.T, args ...string) *server {
	t.Helper()
	f, err := parseServeFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := start(f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.finish(io.Discard, io.Discard) })
	return s
}

// call sends method path (under the admin origin) with body ("" for none)
// and decodes the JSON answer.
func call(t *testing.T, adminURL, method, path, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, strings.TrimSuffix(adminURL, "/admin/")+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// TestNoAgentImports: cmd/poppytest checks agents with poppytest's own
// code, so it must not import any of the agent's packages.
func TestNoAgentImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(pkg, "github.com/poppy-mcp/poppy-mcp/"); ok && rest != "poppytest" && rest != "cmd/poppytest" {
			t.Errorf("cmd/poppytest imports %s", pkg)
		}
	}
}

// TestAdminOpenAPI: the admin API's document is valid OpenAPI 3.1 (by
// kin-openapi) and its operations are exactly the routes registered, each
// of which answers (not with the router's "no such route").
func TestAdminOpenAPI(t *testing.T) {
	s := startInProcess(t)
	resp, err := http.Get(s.info.OpenAPIURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid: %v", err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	var registered []string
	for _, r := range newAdminMux(&admin{reg: s.reg, info: s.info}).routes {
		registered = append(registered, r.method+" "+r.path)
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if !slices.Equal(documented, registered) {
		t.Fatalf("documented and registered routes differ:\ndocumented %q\nregistered %q", documented, registered)
	}
	params := regexp.MustCompile(`\{(run|[a-z_]+)\}`)
	for _, route := range registered {
		method, path, _ := strings.Cut(route, " ")
		if route == "POST /admin/shutdown" {
			continue
		}
		path = params.ReplaceAllStringFunc(path, func(p string) string {
			if p == "{run}" {
				return "default"
			}
			return "nope"
		})
		status, v := call(t, s.info.AdminURL, method, path, "")
		if msg, _ := v["message"].(string); status == http.StatusMethodNotAllowed || strings.Contains(msg, "is not a route") {
			t.Errorf("%s: %d %v", route, status, v)
		}
	}
}

// TestAdminRuns: runs are made, found, refused when they would clash,
// reset with their violations kept, and deleted.
func TestAdminRuns(t *testing.T) {
	s := startInProcess(t)
	u := s.info.AdminURL
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"name": "a", "options": {"no_nonce": true, "token_lifetime": "90s"}}`, 201, `"domain":"a.poppytest.test"`},
		{`{"name": "a"}`, 409, "a run named a exists"},
		{`{"name": "b", "domain": "a.poppytest.test"}`, 409, "a.poppytest.test is served by run a"},
		{`{"name": "c", "options": {"no_such": 1}}`, 400, `no option \"no_such\"`},
		{`{"name": "c", "options": {"token_lifetime": "soon"}}`, 400, "is not a duration"},
		{`{"name": "c", "scenario": {"sign_in": ["password"]}}`, 400, "sign_in[0]"},
		{`{"name": "c", "client_id": "http://agent.c.test/agent.json"}`, 400, "is not an https URL"},
		{`{"name": "Bad Name"}`, 400, "lowercase"},
		{`{"name": "d", "nme": 1}`, 400, "unknown field"},
		{``, 201, `"name":"run-1"`},
	} {
		status, v := call(t, u, "POST", "/admin/runs", tc.body)
		b, _ := json.Marshal(v)
		if status != tc.status || !strings.Contains(string(b), tc.want) {
			t.Errorf("POST %s: %d %s, want %d with %s", tc.body, status, b, tc.status, tc.want)
		}
	}
	if status, v := call(t, u, "DELETE", "/admin/runs/default", ""); status != 409 {
		t.Errorf("deleting the default run: %d %v", status, v)
	}
	if status, _ := call(t, u, "DELETE", "/admin/runs/run-1", ""); status != 204 {
		t.Errorf("deleting run-1: %d", status)
	}
	if status, v := call(t, u, "GET", "/admin/runs", ""); status != 200 || len(v["runs"].([]any)) != 2 {
		t.Errorf("runs: %d %v", status, v)
	}
	if status, v := call(t, u, "POST", "/admin/runs/a/reset", `{"options": {"no_nonce": false}}`); status != 200 || v["options"].(map[string]any)["no_nonce"] != false {
		t.Errorf("reset: %d %v", status, v)
	}
	if status, _ := call(t, u, "GET", "/admin/runs/zzz", ""); status != 404 {
		t.Errorf("an unknown run: %d", status)
	}
}

// TestAdminRefusesForeignRequests: the admin API answers loopback Hosts
// and no web page, and says so in JSON; an unknown route is a JSON 404 and
// a wrong method a 405 with Allow.
func TestAdminRefusesForeignRequests(t *testing.T) {
	s := startInProcess(t)
	origin := strings.TrimSuffix(s.info.AdminURL, "/admin/")
	for _, tc := range []struct {
		method, path string
		header       http.Header
		status       int
	}{
		{"GET", "/admin/runs", http.Header{"Origin": {"https://evil.test"}}, 403},
		{"GET", "/admin/nope", nil, 404},
		{"DELETE", "/admin/violations", nil, 405},
	} {
		req, _ := http.NewRequest(tc.method, origin+tc.path, nil)
		for k, v := range tc.header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, b)
		}
	}
	req, _ := http.NewRequest("GET", origin+"/admin/runs", nil)
	req.Host = "rebound.evil.test"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("a foreign Host: %v %v", resp, err)
	}
	if status, v := call(t, s.info.AdminURL, "POST", "/admin/runs/default/faults/rate_limit", `{"host": "example.com", "path": "/x", "count": 1, "retry_after": "2s", "extra": 1}`); status != 400 {
		t.Errorf("a fault with a parameter it does not take: %d %v", status, v)
	}
	body := bytes.Repeat([]byte("x"), maxAdminBody+10)
	req, _ = http.NewRequest("POST", origin+"/admin/runs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("a body too large: %v %v", resp, err)
	}
}

// TestServeRefusesNonLoopback: poppytest serve binds loopback only.
func TestServeRefusesNonLoopback(t *testing.T) {
	for _, args := range [][]string{{"--addr", "0.0.0.0:0"}, {"--admin", "192.0.2.1:80"}, {"--admin", "example.com:80"}} {
		if _, err := parseServeFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestInstructions: what serve prints for a scenario's Company names its
// hosts with --resolve values, the CA file, its sign-in types, and its
// accounts with their mediated fields and one-time codes.
func TestInstructions(t *testing.T) {
	s := startInProcess(t, "--scenario", "../../poppytest/testdata/scenario-example.yaml")
	in := s.info.instructions(s.reg)
	r := in.Runs[0]
	if r.Domain != "shop.test" || !slices.Equal(r.SignIn, []string{"device", "mediated"}) || len(r.Accounts) != 2 ||
		r.Accounts[1].Fields["password"] != "kai-secret-9" || !r.Accounts[1].OneTimeCode || r.Resolve[0] != "shop.test:443:"+in.Addr {
		t.Errorf("run %+v", r)
	}
	var text bytes.Buffer
	in.writeText(&text)
	for _, want := range []string{"SSL_CERT_FILE=" + in.CAFile, "--resolve auth.shop.test:443:" + in.Addr, "--connect-to ::" + in.Addr,
		"acct_kai  email=kai@shop.test password=kai-secret-9  (one-time code: GET " + in.AdminURL + "runs/default/codes)",
		"sign-in    device mediated", in.OpenAPIURL} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the instructions lack %q:\n%s", want, text.String())
		}
	}
}

// TestDocs: docs/poppytest-server.md names every option and fault, and its
// scenario examples parse.
func TestDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/poppytest-server.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, o := range options {
		if !strings.Contains(doc, "| `"+o.name+"` |") {
			t.Errorf("the docs do not list the option %s", o.name)
		}
	}
	for _, f := range faults {
		if !strings.Contains(doc, "`"+f.name+"`") {
			t.Errorf("the docs do not list the fault %s", f.name)
		}
	}
	examples := strings.Split(doc, "```yaml\n")[1:]
	for _, rest := range examples {
		example, _, _ := strings.Cut(rest, "```")
		if _, err := poppytest.ParseScenario([]byte(example)); err != nil {
			t.Errorf("the scenario example: %v\n%s", err, example)
		}
	}
	if len(examples) != 2 {
		t.Errorf("%d scenario examples, want 2", len(examples))
	}
}
