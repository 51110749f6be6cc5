package poppytest_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// scenarioYAML shapes a Company unlike the example shop: a members' club
// whose mediated sign-in asks for a member number and a PIN, with a billing
// API, one MCP tool and two pages.
const scenarioYAML = `# A members' club
organization: Harbor Club
sign_in: [device, mediated]
accounts:
  - id: acct_lee
    credentials: {member_number: "40017", pin: "2468"}
    one_time_code: true
    sent_to: Text to the phone ending in 09
apis:
  - name: billing
    title: Billing
    description: Invoices and payments
    operations:
      - id: listInvoices
        method: GET
        path: /invoices
        summary: List the member's invoices
        scopes: [poppy:read]
        response:
          body: {invoices: [{id: inv_7, total_usd: 120}]}
      - id: payInvoice
        method: POST
        path: /invoices/{invoice_id}/payments
        scopes: [poppy:write]
        request_body: {type: object, properties: {amount_usd: {type: integer}}}
        response: {status: 201, body: {status: paid}}
mcp_tools:
  - name: opening_hours
    description: When the club is open
    text: Open 7 to 22 every day.
  - name: locker
    description: The member's locker
    scopes: [poppy:read]
    structured: {locker: 12}
pages:
  - path: /help
    title: Help
    html: <p id="help">Ask at the front desk.</p>
  - path: /membership
    signed_in: true
    scopes: [poppy:read]
    html: <p id="card">Member since 2019</p>
poppy_json:
  auth:
    custom_scopes: null
    mediated:
      fields:
        - {name: member_number, label: Member number, secret: false}
        - {name: pin, label: PIN, secret: true}
resource_metadata:
  scopes_supported: [poppy:read]
`

func TestParseScenario(t *testing.T) {
	sc, err := poppytest.ParseScenario([]byte(scenarioYAML))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Organization != "Harbor Club" || len(sc.Accounts) != 1 || sc.Accounts[0].Credentials["pin"] != "2468" ||
		len(sc.APIs) != 1 || len(sc.APIs[0].Operations) != 2 || sc.APIs[0].Operations[1].Response.Status != 201 ||
		len(sc.MCPTools) != 2 || len(sc.Pages) != 2 || sc.PoppyJSON["auth"] == nil {
		t.Errorf("parsed %+v", sc)
	}
	// The same scenario as JSON.
	asJSON := `{"organization": "Harbor Club", "sign_in": ["device"], "apis": [{"name": "billing", "operations": [
		{"id": "listInvoices", "method": "GET", "path": "/invoices", "response": {"body": {"n": 1}}}]}]}`
	if sc, err := poppytest.ParseScenario([]byte(asJSON)); err != nil || sc.APIs[0].Operations[0].Path != "/invoices" {
		t.Errorf("JSON: %+v, %v", sc, err)
	}
	if sc, err := poppytest.ParseScenario(nil); err != nil || sc == nil {
		t.Errorf("an empty file: %v, %v; want the example Company", sc, err)
	}
}

// TestParseScenarioErrors: each mistake is reported with its line and
// field, every one of them at once.
func TestParseScenarioErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unknown field", "organization: X\napis:\n  - name: b\n    operation: []\n", []string{"line 4", "field operation not found"}},
		{"syntax", "sign_in: [device\n", []string{"line 2"}},
		{"type", "accounts: yes\n", []string{"line 1", "cannot construct"}},
		{"duplicate key", "domain: a.test\ndomain: b.test\n", []string{"line 2", `"domain" already defined`}},
		{"rules", "domain: Shop\nsign_in: [device, password]\napis:\n  - name: store\n    operations:\n      - id: x\n        method: FETCH\n        path: orders\n",
			[]string{"line 1, domain:", "line 2, sign_in[1]:", "line 4, apis[0].name:", "line 7, apis[0].operations[0].method:", "line 8, apis[0].operations[0].path:"}},
		{"same route", "apis:\n  - name: b\n    operations:\n      - {id: a, method: GET, path: \"/x/{id}\"}\n      - {id: b, method: GET, path: \"/x/{other}\"}\n",
			[]string{"line 5, apis[0].operations[1].path:"}},
		{"tool schema", "mcp_tools:\n  - name: t\n    input_schema: {type: string}\n", []string{"line 3, mcp_tools[0].input_schema:"}},
		{"page", "pages:\n  - path: help\n  - path: /a\n    scopes: [x]\n", []string{"line 2, pages[0].path:", "line 4, pages[1].scopes:"}},
		{"account", "accounts:\n  - email: a@b.test\n", []string{"line 2, accounts[0].id:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := poppytest.ParseScenario([]byte(tc.in))
			var se *poppytest.ScenarioError
			if err == nil || !errors.As(err, &se) {
				t.Fatalf("error %v, want ScenarioErrors", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "poppytest: scenario: ") {
				t.Errorf("error %q does not say where it comes from", err)
			}
		})
	}
}

// TestScenarioExampleFile: the example scenario of the docs parses.
func TestScenarioExampleFile(t *testing.T) {
	b, err := os.ReadFile("testdata/scenario-example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poppytest.ParseScenario(b); err != nil {
		t.Fatal(err)
	}
}

// TestScenarioCompany: the Company a scenario describes serves its
// documents, signs in its account with the fields it asks for and a
// one-time code, answers its API and MCP tools with their canned answers
// behind their scopes, and shows its pages as the Session allows.
func TestScenarioCompany(t *testing.T) {
	sc, err := poppytest.ParseScenario([]byte(scenarioYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, rt, a, _ := newSignInCompany(t, &poppytest.Options{Scenario: sc})
	doc := getJSON(t, s, "https://example.com/.well-known/poppy.json")
	auth := doc["auth"].(map[string]any)
	var urls []string
	for _, e := range doc["apis"].([]any) {
		urls = append(urls, e.(map[string]any)["url"].(string))
	}
	if doc["organization"].(map[string]any)["name"] != "Harbor Club" || auth["direct"] != nil || auth["device"] == nil ||
		auth["custom_scopes"] != nil || !cmp.Equal(urls, []string{"https://api.example.com/billing/openapi.json", "https://mcp.example.com/mcp"}) {
		t.Errorf("poppy.json: %v", doc)
	}
	if rmd := getJSON(t, s, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"); !cmp.Equal(rmd["scopes_supported"], []any{"poppy:read"}) {
		t.Errorf("the MCP server's metadata: %v", rmd)
	}
	if api := getJSON(t, s, "https://api.example.com/billing/openapi.json"); api["openapi"] != "3.1.0" ||
		api["paths"].(map[string]any)["/invoices/{invoice_id}/payments"] == nil {
		t.Errorf("the API's document: %v", api)
	}

	tok := a.startSession().str("access_token")
	const invoices = "https://api.example.com/billing/invoices"
	if r := a.getWithToken(invoices, tok); r.status != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), "sign_in_required") {
		t.Errorf("signed out: %d %v", r.status, r.header)
	}
	r := a.mediated(tok, map[string]any{"scope": "poppy:read", "credentials": map[string]string{"member_number": "40017", "pin": "2468"}})
	if r.str("status") != "code_required" || r.body["code"].(map[string]any)["sent_to"] != "Text to the phone ending in 09" {
		t.Fatalf("sign-in: %d %v", r.status, r.body)
	}
	r = a.submitCode(tok, r.str("sign_in_id"), s.LastCode(r.str("sign_in_id")))
	signed := r.str("access_token")
	if r.str("status") != "complete" || signed == "" {
		t.Fatalf("code: %d %v", r.status, r.body)
	}
	if r := a.getWithToken(invoices, signed); r.status != 200 || !strings.Contains(mustMarshal(t, r.body), `"inv_7"`) {
		t.Errorf("canned answer: %d %v", r.status, r.body)
	}
	if r := a.postJSON("https://api.example.com/billing/invoices/inv_7/payments", signed, "application/json", map[string]int{"amount_usd": 120}); r.status != 403 {
		t.Errorf("without poppy:write: %d %v", r.status, r.body)
	}
	if a := fmt.Sprintf("%v %#v", poppytest.Account{ID: "acct_lee", Credentials: sc.Accounts[0].Credentials}, poppytest.Account{Credentials: map[string]string{"pin": "2468"}}); strings.Contains(a, "2468") {
		t.Errorf("an account shows its credentials: %s", a)
	}
	wantNoViolation(t, s, rt)
}

// TestScenarioMCPAndPages: the MCP server has the scenario's tools only,
// with their canned results and scopes; pages follow the Session.
func TestScenarioMCPAndPages(t *testing.T) {
	sc, err := poppytest.ParseScenario([]byte(scenarioYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, rt, a, _ := newSignInCompany(t, &poppytest.Options{Scenario: sc})
	m := newMCPClient(a)
	m.initialize()
	if names, _ := m.toolNames(); strings.Join(names, ",") != "locker,opening_hours" && strings.Join(names, ",") != "opening_hours,locker" {
		t.Errorf("tools %v", names)
	}
	res := m.call("opening_hours", nil).result()
	if text := res["content"].([]any)[0].(map[string]any)["text"]; text != "Open 7 to 22 every day." {
		t.Errorf("opening_hours: %v", res)
	}
	if r := m.call("locker", nil); r.status != 401 {
		t.Errorf("locker signed out: %d, want 401 sign_in_required", r.status)
	}
	if page := sitePage(t, s, "https://example.com/help", nil); !strings.Contains(page, `<p id="help">Ask at the front desk.</p>`) {
		t.Errorf("help page: %s", page)
	}
	if page := sitePage(t, s, "https://www.example.com/membership", nil); strings.Contains(page, "card") || !strings.Contains(page, "Sign in to see this page.") {
		t.Errorf("membership page for a visitor: %s", page)
	}
	wantNoViolation(t, s, rt)
}
