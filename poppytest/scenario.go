package poppytest

// This file reads a scenario: the shape of a Company (its documents,
// sign-in types, accounts, APIs with canned responses, MCP tools and
// website pages) from a JSON or YAML file, so a team can shape the Company
// it tests its Personal Agent against without writing Go. Every mistake is
// reported with where it is (the line, where the YAML parser knows it, and
// the path of the field). scenario_company.go builds the Company.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// maxScenario bounds a scenario file.
const maxScenario = 4 << 20

// Scenario is the shape of a Company. A section left out keeps poppytest's
// own Company there: the example shop's accounts, store API, MCP tools and
// website. Its zero value is that Company unchanged.
type Scenario struct {
	// Domain is the Company's domain, used when Options.Domain is empty.
	Domain string `json:"domain,omitempty" yaml:"domain"`
	// Organization is organization.name in poppy.json.
	Organization string `json:"organization,omitempty" yaml:"organization"`
	// SignIn lists the sign-in types poppy.json offers, of "direct",
	// "device" and "mediated". Nil: all three.
	SignIn []string `json:"sign_in,omitempty" yaml:"sign_in"`
	// Accounts replace the default accounts (DefaultAccounts).
	Accounts []ScenarioAccount `json:"accounts,omitempty" yaml:"accounts"`
	// APIs replace the store API in poppy.json with OpenAPI APIs whose
	// operations give canned answers.
	APIs []ScenarioAPI `json:"apis,omitempty" yaml:"apis"`
	// MCPTools replace the default tools of the MCP server.
	MCPTools []MCPTool `json:"mcp_tools,omitempty" yaml:"mcp_tools"`
	// Pages are added to the website (a page at "/" replaces the home page).
	Pages []ScenarioPage `json:"pages,omitempty" yaml:"pages"`
	// PoppyJSON and Metadata are JSON merge patches (RFC 7396) applied last
	// to poppy.json and to the issuer's RFC 8414 metadata: a member set to
	// null is removed.
	PoppyJSON map[string]any `json:"poppy_json,omitempty" yaml:"poppy_json"`
	Metadata  map[string]any `json:"metadata,omitempty" yaml:"metadata"`
	// ResourceMetadata is the same for the MCP server's RFC 9728 metadata.
	ResourceMetadata map[string]any `json:"resource_metadata,omitempty" yaml:"resource_metadata"`
}

// ScenarioAccount is an account at the Company.
type ScenarioAccount struct {
	ID       string `json:"id" yaml:"id"`
	Email    string `json:"email,omitempty" yaml:"email"`
	Password string `json:"password,omitempty" yaml:"password"`
	// Credentials are the account's answers to auth.mediated.fields by
	// field name, for a Company whose fields are not email and password.
	Credentials map[string]string `json:"credentials,omitempty" yaml:"credentials"`
	// OneTimeCode makes Mediated Sign-In to the account ask for a code.
	OneTimeCode bool `json:"one_time_code,omitempty" yaml:"one_time_code"`
	// SentTo is where the code goes, as code_required shows it.
	SentTo string `json:"sent_to,omitempty" yaml:"sent_to"`
}

// Account is the account the Company has for a.
func (a ScenarioAccount) Account() Account {
	return Account{ID: a.ID, Email: a.Email, Password: a.Password, RequiresCode: a.OneTimeCode,
		SentTo: orDefault(a.SentTo, "the account's phone"), Credentials: a.Credentials}
}

// ScenarioAPI is an OpenAPI API of the Company: its document is served at
// https://api.<domain>/<name>/openapi.json and its operations under
// https://api.<domain>/<name>.
type ScenarioAPI struct {
	Name        string              `json:"name" yaml:"name"`
	Title       string              `json:"title,omitempty" yaml:"title"`
	Description string              `json:"description,omitempty" yaml:"description"`
	Operations  []ScenarioOperation `json:"operations" yaml:"operations"`
}

// ScenarioOperation is one operation, answered with its canned Response to
// any caller with a DPoP Session Token that has its Scopes.
type ScenarioOperation struct {
	ID          string `json:"id" yaml:"id"` // the operationId
	Method      string `json:"method" yaml:"method"`
	Path        string `json:"path" yaml:"path"` // such as /invoices/{invoice_id}
	Summary     string `json:"summary,omitempty" yaml:"summary"`
	Description string `json:"description,omitempty" yaml:"description"`
	// Scopes are the account scopes the operation needs. None: a Session
	// is enough, signed in or not.
	Scopes []string `json:"scopes,omitempty" yaml:"scopes"`
	// Parameters are OpenAPI parameter objects; a path parameter not
	// listed is added as a required string.
	Parameters []map[string]any `json:"parameters,omitempty" yaml:"parameters"`
	// RequestBody is the JSON Schema of a JSON request body. Nil: none.
	RequestBody map[string]any `json:"request_body,omitempty" yaml:"request_body"`
	// Response is the canned answer.
	Response ScenarioResponse `json:"response" yaml:"response"`
}

// ScenarioResponse is a canned answer.
type ScenarioResponse struct {
	Status int `json:"status,omitempty" yaml:"status"` // zero: 200
	// Body is sent as JSON, or as it is when it is a string and
	// ContentType is not JSON.
	Body        any    `json:"body,omitempty" yaml:"body"`
	ContentType string `json:"content_type,omitempty" yaml:"content_type"` // zero: application/json
}

// MCPTool is a tool of the Company's MCP server with a canned result.
type MCPTool struct {
	Name        string         `json:"name" yaml:"name"`
	Description string         `json:"description,omitempty" yaml:"description"`
	InputSchema map[string]any `json:"input_schema,omitempty" yaml:"input_schema"` // nil: any object
	// Scopes are the account scopes a call needs (§6: the server enforces
	// them with insufficient_scope).
	Scopes []string `json:"scopes,omitempty" yaml:"scopes"`
	// Text, Structured and IsError are the result: its text content, its
	// structuredContent, and whether it is an error.
	Text       string `json:"text,omitempty" yaml:"text"`
	Structured any    `json:"structured,omitempty" yaml:"structured"`
	IsError    bool   `json:"is_error,omitempty" yaml:"is_error"`
}

// ScenarioPage is a page of the website, on Domain and www.Domain.
type ScenarioPage struct {
	Path  string `json:"path" yaml:"path"`
	Title string `json:"title,omitempty" yaml:"title"`
	// HTML is the page's content, as the Company wrote it.
	HTML string `json:"html,omitempty" yaml:"html"`
	// SignedIn shows the content only to a Session signed in with Scopes;
	// others are asked to sign in.
	SignedIn bool     `json:"signed_in,omitempty" yaml:"signed_in"`
	Scopes   []string `json:"scopes,omitempty" yaml:"scopes"`
}

// ScenarioError is one mistake in a scenario file.
type ScenarioError struct {
	Line  int    // 1-based; 0 when unknown
	Field string // such as "apis[0].operations[2].method"; "" for the file
	Msg   string
}

func (e *ScenarioError) Error() string {
	var where []string
	if e.Line > 0 {
		where = append(where, "line "+strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		where = append(where, e.Field)
	}
	if len(where) == 0 {
		return "poppytest: scenario: " + e.Msg
	}
	return "poppytest: scenario: " + strings.Join(where, ", ") + ": " + e.Msg
}

// ParseScenario reads a scenario in YAML or JSON (a JSON document is YAML)
// and checks it. Its error lists every mistake found, each a *ScenarioError
// (errors.As finds the first).
func ParseScenario(data []byte) (*Scenario, error) {
	if len(data) > maxScenario {
		return nil, &ScenarioError{Msg: fmt.Sprintf("larger than %d bytes", maxScenario)}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file, the empty scenario
		return nil, yamlError(err)
	}
	v := &validator{root: &root}
	sc.validate(v)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return &sc, nil
}

// yamlLine finds "line N" in a YAML library message.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError turns a YAML library error into ScenarioErrors, one per line
// of its message, with the line number each names.
func yamlError(err error) error {
	var out []error
	for _, msg := range strings.Split(strings.ReplaceAll(err.Error(), "; line ", "\nline "), "\n") {
		msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), "yaml:"))
		msg = strings.TrimSpace(strings.TrimPrefix(msg, "construct errors:"))
		if msg == "" {
			continue
		}
		e := &ScenarioError{Msg: msg}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(msg, m[0]), ":"))
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		out = append(out, &ScenarioError{Msg: err.Error()})
	}
	return errors.Join(out...)
}

// validator collects the mistakes of a decoded scenario, finding their
// lines in the parsed document.
type validator struct {
	root *yaml.Node
	errs []error
}

// fail records a mistake at the field path, such as "apis", 0, "name".
func (v *validator) fail(msg string, path ...any) {
	var field strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&field, "[%d]", p)
		case string:
			if field.Len() > 0 {
				field.WriteByte('.')
			}
			field.WriteString(p)
		}
	}
	v.errs = append(v.errs, &ScenarioError{Line: nodeLine(v.root, path), Field: field.String(), Msg: msg})
}

// nodeLine is the line of the node at path in a parsed document, or of the
// nearest node above it that exists; 0 when none is known.
func nodeLine(n *yaml.Node, path []any) int {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, p := range path {
		if n == nil {
			break
		}
		line = n.Line
		var next *yaml.Node
		switch p := p.(type) {
		case string:
			for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
					line = n.Content[i].Line
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && p < len(n.Content) {
				next = n.Content[p]
			}
		}
		n = next
	}
	if n != nil {
		line = n.Line
	}
	return line
}

// Syntax of names in a scenario.
var (
	domainPattern  = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$`)
	namePattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	opIDPattern    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)
	toolPattern    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	apiPathPattern = regexp.MustCompile(`^(/([A-Za-z0-9._~-]+|\{[A-Za-z_][A-Za-z0-9_]*\}))+$`)
	pagePattern    = regexp.MustCompile(`^/([A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*)?$`)
	pathParamName  = regexp.MustCompile(`\{[^}]*\}`)
)

// reservedAPINames are paths of api.<domain> the Company already uses.
var reservedAPINames = []string{"store", "poppy", "account", "openapi.json"}

// methods are the HTTP methods an operation may have.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

func (sc *Scenario) validate(v *validator) {
	if sc.Domain != "" && !domainPattern.MatchString(sc.Domain) {
		v.fail(fmt.Sprintf("%q is not a lowercase domain name such as shop.test", sc.Domain), "domain")
	}
	for i, t := range sc.SignIn {
		if !slices.Contains([]string{"direct", "device", "mediated"}, t) {
			v.fail(fmt.Sprintf("%q is not direct, device or mediated", t), "sign_in", i)
		}
	}
	seen := map[string]bool{}
	for i, a := range sc.Accounts {
		switch {
		case a.ID == "":
			v.fail("an account needs an id, such as acct_dana", "accounts", i, "id")
		case seen[a.ID]:
			v.fail(fmt.Sprintf("the id %q is used twice", a.ID), "accounts", i, "id")
		case a.Email == "" && a.Credentials == nil:
			v.fail("an account needs an email and password, or credentials", "accounts", i)
		}
		seen[a.ID] = true
	}
	sc.validateAPIs(v)
	sc.validateTools(v)
	sc.validatePages(v)
	for _, f := range []struct {
		name string
		v    any
	}{{"poppy_json", sc.PoppyJSON}, {"metadata", sc.Metadata}, {"resource_metadata", sc.ResourceMetadata}} {
		if _, err := json.Marshal(f.v); err != nil {
			v.fail("is not a JSON object: "+err.Error(), f.name)
		}
	}
}

func (sc *Scenario) validateAPIs(v *validator) {
	names := map[string]bool{}
	for i, api := range sc.APIs {
		if !namePattern.MatchString(api.Name) || slices.Contains(reservedAPINames, api.Name) || names[api.Name] {
			v.fail(fmt.Sprintf("name %q must be new, lowercase letters, digits and -, and not one of %q", api.Name, reservedAPINames), "apis", i, "name")
		}
		names[api.Name] = true
		if len(api.Operations) == 0 {
			v.fail("an API needs at least one operation", "apis", i, "operations")
		}
		ids, routes := map[string]bool{}, map[string]bool{}
		for j, op := range api.Operations {
			at := []any{"apis", i, "operations", j}
			if !opIDPattern.MatchString(op.ID) || ids[op.ID] {
				v.fail(fmt.Sprintf("id %q must be new in the API, a letter then letters, digits or _", op.ID), append(at, "id")...)
			}
			ids[op.ID] = true
			if !slices.Contains(methods, op.Method) {
				v.fail(fmt.Sprintf("method %q is not one of %q", op.Method, methods), append(at, "method")...)
			}
			// Two paths that differ only in their parameters' names are one route.
			route := op.Method + " " + pathParamName.ReplaceAllString(op.Path, "{}")
			if !apiPathPattern.MatchString(op.Path) || routes[route] {
				v.fail(fmt.Sprintf("path %q must be new and look like /invoices/{invoice_id}", op.Path), append(at, "path")...)
			}
			routes[route] = true
			if s := op.Response.Status; s != 0 && (s < 200 || s > 599) {
				v.fail(fmt.Sprintf("status %d is not 200 to 599", s), append(at, "response", "status")...)
			}
			if _, err := json.Marshal(op.Response.Body); err != nil {
				v.fail("is not JSON: "+err.Error(), append(at, "response", "body")...)
			}
			if _, err := json.Marshal([]any{op.Parameters, op.RequestBody}); err != nil {
				v.fail("parameters or request_body is not JSON: "+err.Error(), at...)
			}
			for k, p := range op.Parameters {
				name, _ := p["name"].(string)
				if in, _ := p["in"].(string); name == "" || !slices.Contains([]string{"query", "path", "header", "cookie"}, in) {
					v.fail("a parameter needs a name, and in: query, path, header or cookie", append(at, "parameters", k)...)
				}
			}
		}
	}
}

func (sc *Scenario) validateTools(v *validator) {
	names := map[string]bool{}
	for i, t := range sc.MCPTools {
		if !toolPattern.MatchString(t.Name) || names[t.Name] {
			v.fail(fmt.Sprintf("name %q must be new, 1 to 64 letters, digits, _, . or -", t.Name), "mcp_tools", i, "name")
		}
		names[t.Name] = true
		if _, err := json.Marshal([]any{t.InputSchema, t.Structured}); err != nil {
			v.fail("input_schema or structured is not JSON: "+err.Error(), "mcp_tools", i)
		}
		if t.InputSchema != nil && t.InputSchema["type"] != "object" {
			v.fail(`an input schema must have "type": "object"`, "mcp_tools", i, "input_schema")
		}
	}
}

func (sc *Scenario) validatePages(v *validator) {
	paths := map[string]bool{}
	for i, p := range sc.Pages {
		if !pagePattern.MatchString(p.Path) || paths[p.Path] || p.Path == browserPath || p.Path == poppyJSONPath {
			v.fail(fmt.Sprintf("path %q must be new and look like /help or /account/settings", p.Path), "pages", i, "path")
		}
		paths[p.Path] = true
		if len(p.Scopes) > 0 && !p.SignedIn {
			v.fail("scopes apply only to a page with signed_in: true", "pages", i, "scopes")
		}
	}
}
