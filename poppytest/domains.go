package poppytest

// This file serves the Company's other domains (Options.OtherDomains): one
// Company under one issuer (Poppy 0.1 §3.2: "Several domains MAY name the
// same issuer, such as a Company with a domain for each country, and they
// are then one Company: the same User IDs (4.2), Sessions, and Account
// Tokens apply to all of them"). Each domain has documents of its own: a
// poppy.json naming the one issuer and endpoints on the domain's own hosts;
// a store API whose document has its own title and one more operation,
// getStoreInfo, which says which domain answered; an MCP server with other
// tools (search_products, order_status and store_info); a website whose
// browser-session endpoint takes return_to on that domain only; and its own
// mediated and conversations endpoints. An agent that mixes up the domains'
// documents fails their checks: a browser assertion for one domain's page
// posted to another's endpoint, a one-time code sent to another endpoint
// than the credentials, a Bearer token of one MCP server sent to another.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// otherDomains is Options.OtherDomains lowercased, without primary, empty
// entries or repeats.
func otherDomains(primary string, in []string) []string {
	var out []string
	for _, d := range in {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if d != "" && d != primary && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// domainList is ds as a JSON array.
func domainList(ds []string) []any {
	out := make([]any, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}

// domainOf is the Company's domain that host is, or is under: the longest
// that matches, so a domain under another is its own. "" for none.
func (s *Server) domainOf(host string) string {
	best := ""
	for _, d := range s.Domains() {
		if onHost(d, host) && len(d) > len(best) {
			best = d
		}
	}
	return best
}

// installOtherDomains serves every host and document of each other domain.
func (s *Server) installOtherDomains() {
	for _, d := range s.others {
		for _, h := range []string{d, "www." + d, "auth." + d, "api." + d, "mcp." + d} {
			s.addHost(h)
		}
		doc := s.poppyJSONFor(d)
		s.setJSONDocument(d, poppyJSONPath, doc)
		s.setJSONDocument("www."+d, poppyJSONPath, doc)
		s.installDomainStoreAPI(d)
		s.installDomainMCP(d)
		s.installWebOn(d)
		s.installMediatedOn("auth." + d)
		s.installConversationsOn("api." + d)
	}
}

// storeInfoPath is getStoreInfo's path under the store API's server.
const storeInfoPath = "/info"

// installDomainStoreAPI serves the store API of the other domain d: the
// store document with its own title and server, and getStoreInfo.
func (s *Server) installDomainStoreAPI(d string) {
	api := "api." + d
	doc := storeDocument(s.URL(api, storeBase))
	doc["info"].(map[string]any)["title"] = "Example Company Store API (" + d + ")"
	doc["paths"].(map[string]any)[storeInfoPath] = map[string]any{"get": map[string]any{
		"operationId": "getStoreInfo", "summary": "Which of the Company's stores this is", "tags": []any{"products"},
		"responses": map[string]any{"200": map[string]any{"description": "The store", "content": map[string]any{
			"application/json": map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{
				"domain": map[string]any{"type": "string"}, "name": map[string]any{"type": "string"}}}}}}},
	}}
	s.setJSONDocument(api, openAPIPath, doc)
	s.installStoreAPI(api)
	s.HandleFunc(api, "GET "+storeBase+storeInfoPath, func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.Authenticate(w, r, s.storeResource(hostOnly(r.Host))); ok {
			writeJSON(w, http.StatusOK, storeInfo(s.domainOf(hostOnly(r.Host))))
		}
	})
}

// storeInfo is what getStoreInfo and store_info answer at domain d.
func storeInfo(d string) map[string]string {
	return map[string]string{"domain": d, "name": "Example Company (" + d + ")"}
}

// installDomainMCP serves the MCP server of the other domain d at
// mcp.<d>/mcp, with its RFC 9728 metadata: search_products and
// order_status as on Domain's, and store_info.
func (s *Server) installDomainMCP(d string) {
	var tools []server.ServerTool
	for _, t := range s.mcpTools() {
		if t.Tool.Name == "search_products" || t.Tool.Name == "order_status" {
			tools = append(tools, t)
		}
	}
	info := mcp.NewToolWithRawSchema("store_info", "Which of the Company's stores this MCP server is.",
		json.RawMessage(`{"type":"object","properties":{}}`))
	info.Annotations = mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)}
	tools = append(tools, server.ServerTool{Tool: info, Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v := storeInfo(d)
		return mcp.NewToolResultStructured(v, v["name"]), nil
	}})
	h, _ := s.buildMCPServer(tools)
	s.setJSONDocument("mcp."+d, resourceMetadataPath, s.resourceMetadataFor(d))
	s.Handle("mcp."+d, mcpPath, s.mcpHandler(s.URL("mcp."+d, mcpPath), func() http.Handler { return h }))
}
