package poppytest

// This file builds the Company a Scenario describes (scenario.go): the
// options it sets, its edits of poppy.json and the metadata, its OpenAPI
// APIs with canned answers (Poppy 0.1 §6: each takes DPoP Session Tokens
// and enforces its scopes), its MCP tools with canned results, and its
// website pages, which follow the Session's state as the rest of the
// website does (§5).

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxCannedBody bounds a request body to a canned operation.
const maxCannedBody = 1 << 20

// applyScenario sets what the scenario decides in the Options, before the
// features are installed; mutators the test gave run after the scenario's.
func (s *Server) applyScenario() {
	sc := s.opts.Scenario
	if sc.Accounts != nil && s.opts.Accounts == nil {
		for _, a := range sc.Accounts {
			s.opts.Accounts = append(s.opts.Accounts, a.Account())
		}
	}
	if sc.MCPTools != nil && s.opts.MCPTools == nil {
		s.opts.MCPTools = sc.MCPTools
	}
	poppy, md, rmd := s.opts.PoppyJSON, s.opts.Metadata, s.opts.ResourceMetadata
	s.opts.PoppyJSON = func(doc map[string]any) {
		s.scenarioPoppyJSON(doc)
		if poppy != nil {
			poppy(doc)
		}
	}
	s.opts.Metadata = func(doc map[string]any) {
		mergePatch(doc, sc.Metadata)
		if md != nil {
			md(doc)
		}
	}
	s.opts.ResourceMetadata = func(doc map[string]any) {
		mergePatch(doc, sc.ResourceMetadata)
		if rmd != nil {
			rmd(doc)
		}
	}
}

// scenarioPoppyJSON edits poppy.json as the scenario says.
func (s *Server) scenarioPoppyJSON(doc map[string]any) {
	sc := s.opts.Scenario
	if org, ok := doc["organization"].(map[string]any); ok && sc.Organization != "" {
		org["name"] = sc.Organization
	}
	if auth, ok := doc["auth"].(map[string]any); ok && sc.SignIn != nil {
		for _, kind := range []string{"direct", "device", "mediated"} {
			if !slices.Contains(sc.SignIn, kind) {
				delete(auth, kind)
			}
		}
	}
	if sc.APIs != nil {
		apis := []any{}
		for _, api := range sc.APIs {
			apis = append(apis, map[string]any{"type": "openapi", "url": s.cannedDocumentURL(api.Name),
				"description": orDefault(api.Description, api.Title)})
		}
		old, _ := doc["apis"].([]any)
		for _, a := range old {
			if e, ok := a.(map[string]any); !ok || e["url"] != s.openAPIURL() {
				apis = append(apis, a)
			}
		}
		doc["apis"] = apis
	}
	mergePatch(doc, sc.PoppyJSON)
}

// mergePatch applies patch to doc as RFC 7396 §2 says: a null member is
// removed, an object merged member by member, anything else replaces.
func mergePatch(doc, patch map[string]any) {
	for k, v := range patch {
		switch v := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			target, ok := doc[k].(map[string]any)
			if !ok {
				target = map[string]any{}
				doc[k] = target
			}
			mergePatch(target, v)
		default:
			doc[k] = jsonClone(v)
		}
	}
}

// jsonClone is a deep copy of a JSON value, so a served document never
// shares a slice with the scenario.
func jsonClone(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil // ParseScenario refused what does not marshal
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// installScenario serves the scenario's APIs and pages.
func (s *Server) installScenario() {
	api := "api." + s.domain
	for _, a := range s.opts.Scenario.APIs {
		s.setJSONDocument(api, "/"+a.Name+openAPIPath, s.cannedDocument(a))
		for _, op := range a.Operations {
			s.HandleFunc(api, op.Method+" /"+a.Name+op.Path, s.cannedOperation(op))
		}
	}
	for _, p := range s.opts.Scenario.Pages {
		pattern := "GET " + p.Path
		if p.Path == "/" {
			pattern = "GET /{$}"
		}
		for _, host := range []string{s.domain, "www." + s.domain} {
			s.HandleFunc(host, pattern, s.scenarioPage(p))
		}
	}
}

// cannedDocumentURL is where the API name's OpenAPI document is served.
func (s *Server) cannedDocumentURL(name string) string {
	return s.URL("api."+s.domain, "/"+name+openAPIPath)
}

// pathParam matches a path template's parameters, such as {invoice_id}.
var pathParam = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// cannedDocument is the OpenAPI 3.1 document of a scenario API.
func (s *Server) cannedDocument(a ScenarioAPI) map[string]any {
	paths := map[string]any{}
	for _, op := range a.Operations {
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[op.Path] = item
		}
		item[strings.ToLower(op.Method)] = cannedOperationDoc(op)
	}
	return map[string]any{
		"openapi":  "3.1.0",
		"info":     map[string]any{"title": orDefault(a.Title, a.Name), "version": "1.0.0", "description": a.Description},
		"servers":  []any{map[string]any{"url": s.URL("api."+s.domain, "/"+a.Name)}},
		"security": []any{map[string]any{"poppy": []any{}}},
		"paths":    paths,
		"components": map[string]any{"securitySchemes": map[string]any{"poppy": map[string]any{
			"type": "http", "scheme": "DPoP",
			"description": "A DPoP-bound Poppy Session Token with a proof (Poppy 0.1 §4.3); the scopes listed are account scopes."}}},
	}
}

// cannedOperationDoc is the OpenAPI operation object of op.
func cannedOperationDoc(op ScenarioOperation) map[string]any {
	params := []any{}
	listed := map[string]bool{}
	for _, p := range op.Parameters {
		params = append(params, jsonClone(p))
		if name, _ := p["name"].(string); p["in"] == "path" {
			listed[name] = true
		}
	}
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		if !listed[m[1]] {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
	}
	resp := map[string]any{"description": "The answer"}
	if op.Response.Body != nil {
		resp["content"] = map[string]any{orDefault(op.Response.ContentType, "application/json"): map[string]any{"example": jsonClone(op.Response.Body)}}
	}
	o := map[string]any{"operationId": op.ID, "parameters": params,
		"responses": map[string]any{strconv.Itoa(cannedStatus(op.Response)): resp}}
	if op.Summary != "" {
		o["summary"] = op.Summary
	}
	if op.Description != "" {
		o["description"] = op.Description
	}
	if op.RequestBody != nil {
		o["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/json": map[string]any{"schema": jsonClone(op.RequestBody)}}}
	}
	if len(op.Scopes) > 0 {
		o["security"] = []any{map[string]any{"poppy": jsonClone(op.Scopes)}}
	}
	return o
}

func cannedStatus(r ScenarioResponse) int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// cannedOperation answers op: the Session Token and its scopes first
// (Poppy 0.1 §6), then a JSON body when the document says so.
func (s *Server) cannedOperation(op ScenarioOperation) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.Authenticate(w, r, "")
		if !ok || len(op.Scopes) > 0 && !s.RequireScopes(w, c, op.Scopes...) {
			return
		}
		if op.RequestBody != nil {
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			body, _ := io.ReadAll(io.LimitReader(r.Body, maxCannedBody))
			if mt != "application/json" || !json.Valid(body) {
				// Poppy 0.1 §6: "The Personal Agent calls a Company API the way that API's type describes"
				s.violate(r, "6", "", "%s %s%s: Content-Type %q with a body that is not JSON, the document says application/json",
					r.Method, hostOnly(r.Host), r.URL.Path, r.Header.Get("Content-Type"))
				writeStoreError(w, http.StatusBadRequest, "invalid_request", "the body does not follow the API's document")
				return
			}
		}
		writeCanned(w, op.Response)
	}
}

// writeCanned writes a canned answer.
func writeCanned(w http.ResponseWriter, resp ScenarioResponse) {
	w.Header().Set("Cache-Control", "no-store")
	ct := orDefault(resp.ContentType, "application/json")
	mt, _, _ := mime.ParseMediaType(ct)
	text, isText := resp.Body.(string)
	if isText && mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(cannedStatus(resp))
		_, _ = io.WriteString(w, text)
		return
	}
	if resp.Body == nil {
		w.WriteHeader(cannedStatus(resp))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(cannedStatus(resp))
	_ = json.NewEncoder(w).Encode(resp.Body)
}

// cannedTools are the MCP tools of Options.MCPTools.
func cannedTools(tools []MCPTool) []server.ServerTool {
	out := make([]server.ServerTool, 0, len(tools))
	for _, t := range tools {
		schema := any(t.InputSchema)
		if t.InputSchema == nil {
			schema = map[string]any{"type": "object"}
		}
		raw, _ := json.Marshal(schema)
		out = append(out, server.ServerTool{
			Tool: mcp.NewToolWithRawSchema(t.Name, t.Description, raw),
			Handler: func(_ context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return cannedResult(t), nil
			},
		})
	}
	return out
}

// cannedResult is a tool's canned result. Structured content also goes
// out as text, for clients that read only text (MCP 2025-11-25 "Structured
// Content": "SHOULD also return the serialized JSON in a TextContent block").
func cannedResult(t MCPTool) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: t.IsError, Content: []mcp.Content{}}
	if t.Text != "" {
		res.Content = append(res.Content, mcp.NewTextContent(t.Text))
	}
	if t.Structured != nil {
		res.StructuredContent = jsonClone(t.Structured)
		if t.Text == "" {
			b, _ := json.Marshal(t.Structured)
			res.Content = append(res.Content, mcp.NewTextContent(string(b)))
		}
	}
	return res
}

// toolScopes are the scopes a call of the MCP tool name needs.
func (s *Server) toolScopes(name string) []string {
	if s.opts.MCPTools == nil {
		return mcpToolScopes[name]
	}
	for _, t := range s.opts.MCPTools {
		if t.Name == name {
			return t.Scopes
		}
	}
	return nil
}

// scenarioPage serves a page of the scenario as the cookie's Session
// sees it now (Poppy 0.1 §5: the website "applies the Session's scopes, as
// the Company's APIs do").
func (s *Server) scenarioPage(p ScenarioPage) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, sess := s.siteFor(r, orDefault(p.Title, p.Path))
		switch {
		case p.SignedIn && !d.SignedIn:
			d.Message = "Sign in to see this page."
		case p.SignedIn && !(&Caller{Scopes: sess.Scopes}).HasScopes(p.Scopes...):
			d.Message = "This Session may not see this page (it needs " + strings.Join(p.Scopes, " ") + ")."
		default:
			d.Content = template.HTML(p.HTML) // the scenario's author wrote it, as a Company writes its pages
		}
		writeSite(w, d)
	}
}
