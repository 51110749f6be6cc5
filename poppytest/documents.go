package poppytest

// This file serves the discovery documents: poppy.json (Poppy 0.1 §3), the
// issuer's authorization server metadata (§3.2, RFC 8414) and the MCP
// server's protected resource metadata (§6, RFC 9728), with ETag and
// Cache-Control so the agent's HTTP cache can be tested, plus any document a
// test sets, and the agent's own documents (§4.1) on AgentHost.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// documents is the Server's concern of served documents: the discovery
// documents, those a test sets (SetDocument) and the agent's own
// (SetAgentDocuments). Its fields are guarded by the Server's mu.
type documents struct {
	*Server
	docs      map[string]*document // host+path -> served document; nil: removed
	agentDocs []string             // paths of SetAgentDocuments on AgentHost
}

// document is one served document. It is replaced, never changed, so a
// handler may serve it after releasing the lock.
type document struct {
	status int
	header http.Header
	body   []byte
}

// Paths of the documents, relative to their hosts.
const (
	poppyJSONPath        = "/.well-known/poppy.json"
	metadataPath         = "/.well-known/oauth-authorization-server"
	resourceMetadataPath = "/.well-known/oauth-protected-resource/mcp" // RFC 9728 §3.1: inserted before the resource's path
	mcpPath              = "/mcp"
)

// Endpoint paths on auth.<domain> named by the default metadata.
const (
	tokenPath         = "/oauth/token"
	revokePath        = "/oauth/revoke"
	authorizePath     = "/oauth/authorize"
	devicePath        = "/oauth/device"
	mediatedPath      = "/poppy/sign-in"
	conversationsPath = "/poppy/conversations"
	browserPath       = "/poppy/browser-session"
)

// installDiscovery serves the default discovery documents, after the Options'
// mutators have edited them.
func (s *documents) installDiscovery() {
	doc := s.defaultPoppyJSON()
	if s.opts.PoppyJSON != nil {
		s.opts.PoppyJSON(doc)
	}
	s.setJSONDocument(s.domain, poppyJSONPath, doc)
	s.setJSONDocument("www."+s.domain, poppyJSONPath, doc)

	md := s.defaultMetadata()
	if s.opts.Metadata != nil {
		s.opts.Metadata(md)
	}
	s.setJSONDocument("auth."+s.domain, metadataPath, md)

	rmd := s.defaultResourceMetadata()
	if s.opts.ResourceMetadata != nil {
		s.opts.ResourceMetadata(rmd)
	}
	s.setJSONDocument("mcp."+s.domain, resourceMetadataPath, rmd)
}

// defaultPoppyJSON is the spec §3 example document, for this Domain.
func (s *documents) defaultPoppyJSON() map[string]any { return s.poppyJSONFor(s.domain) }

// poppyJSONFor is the spec §3 example document for the Company's domain d,
// naming the Company's one issuer and the endpoints on d's own hosts.
func (s *documents) poppyJSONFor(d string) map[string]any {
	return map[string]any{
		"protocol_version": "0.1",
		"organization":     map[string]any{"name": "Example Company", "domain": d},
		"auth": map[string]any{
			"issuer": s.Issuer(),
			"direct": map[string]any{"scopes": []any{"poppy:read", "poppy:write", "addresses"}},
			"device": map[string]any{"scopes": []any{"poppy:read", "poppy:write"}},
			"mediated": map[string]any{
				"endpoint": s.URL("auth."+d, mediatedPath),
				"fields": []any{
					map[string]any{"name": "email", "label": "Email", "secret": false},
					map[string]any{"name": "password", "label": "Password", "secret": true},
				},
				"scopes": []any{"poppy:read"},
			},
			"custom_scopes": map[string]any{"addresses": "Manage saved shipping addresses"},
		},
		"agent": map[string]any{"protocols": []any{
			map[string]any{"type": "poppy", "endpoint": s.URL("api."+d, conversationsPath)},
		}},
		"web": map[string]any{"browser_session_endpoint": s.URL(d, browserPath)},
		"apis": []any{
			map[string]any{"type": "openapi", "url": s.URL("api."+d, "/openapi.json"),
				"description": "Orders, returns, and exchanges"},
			map[string]any{"type": "mcp", "url": s.URL("mcp."+d, mcpPath),
				"description": "Product search and sizing"},
		},
	}
}

// defaultMetadata is the issuer's RFC 8414 metadata (Poppy 0.1 §3.2).
func (s *documents) defaultMetadata() map[string]any {
	auth := "auth." + s.domain
	return map[string]any{
		"issuer":                                           s.Issuer(),
		"token_endpoint":                                   s.URL(auth, tokenPath),
		"revocation_endpoint":                              s.URL(auth, revokePath),
		"authorization_endpoint":                           s.URL(auth, authorizePath),
		"device_authorization_endpoint":                    s.URL(auth, devicePath),
		"poppy_domains":                                    domainList(s.Domains()), // §3.2: "MUST list every domain whose poppy.json names the issuer"
		"response_types_supported":                         []any{"code"},           // RFC 8414 §2: REQUIRED
		"code_challenge_methods_supported":                 []any{"S256"},
		"dpop_signing_alg_values_supported":                []any{"ES256"},
		"token_endpoint_auth_methods_supported":            []any{"private_key_jwt"},
		"token_endpoint_auth_signing_alg_values_supported": []any{"ES256"},
		"authorization_response_iss_parameter_supported":   true, // RFC 9207 §3
		"grant_types_supported": []any{
			"urn:ietf:params:oauth:grant-type:jwt-bearer", "refresh_token",
			"authorization_code", "urn:ietf:params:oauth:grant-type:device_code",
		},
	}
}

// defaultResourceMetadata is the MCP server's RFC 9728 metadata (Poppy 0.1 §6).
func (s *documents) defaultResourceMetadata() map[string]any { return s.resourceMetadataFor(s.domain) }

// resourceMetadataFor is the RFC 9728 metadata of the MCP server of the
// Company's domain d.
func (s *documents) resourceMetadataFor(d string) map[string]any {
	return map[string]any{
		"resource":                 s.URL("mcp."+d, mcpPath),
		"authorization_servers":    []any{s.Issuer()}, // Poppy 0.1 §6: "MUST include auth.issuer"
		"bearer_methods_supported": []any{"header"},
	}
}

// setJSONDocument serves v as JSON with the configured Cache-Control and
// Content-Type.
func (s *documents) setJSONDocument(host, path string, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic("poppytest: document " + host + path + ": " + err.Error())
	}
	h := http.Header{}
	h.Set("Content-Type", s.opts.DocumentContentType)
	h.Set("Cache-Control", s.opts.CacheControl)
	s.SetDocument(host, path, http.StatusOK, h, append(body, '\n'))
}

// SetDocument serves body with status and header at host+path from now on,
// replacing the document or the handler registered there with the pattern
// path (a more specific pattern, such as "GET "+path, still wins), so a
// test can serve a soft-404 HTML page, a redirect to http, a changed
// document, and so on. The header is sent as given; a 200 document without
// an ETag gets one computed from body, and an ETag enables conditional GET
// (If-None-Match gives 304). Only GET and HEAD are answered; other methods
// get 405.
func (s *documents) SetDocument(host, path string, status int, header http.Header, body []byte) {
	host = strings.ToLower(host)
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if status == http.StatusOK && h.Get("ETag") == "" {
		sum := sha256.Sum256(body)
		h.Set("ETag", `"`+hex.EncodeToString(sum[:12])+`"`)
	}
	doc := &document{status: status, header: h, body: append([]byte(nil), body...)}
	key := host + path
	s.mu.Lock()
	s.docs[key] = doc
	s.mu.Unlock()
	s.Handle(host, exactPattern(path), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveDocument(w, r, key)
	}))
}

// exactPattern is a ServeMux pattern that matches only path.
func exactPattern(path string) string {
	if strings.HasSuffix(path, "/") {
		return path + "{$}"
	}
	return path
}

// removeDocument stops serving the document at host+path; requests get 404.
func (s *documents) removeDocument(host, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.docs[host+path]; ok {
		s.docs[host+path] = nil
	}
}

func (s *documents) serveDocument(w http.ResponseWriter, r *http.Request, key string) {
	s.mu.Lock()
	doc := s.docs[key]
	s.mu.Unlock()
	if doc == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "poppytest: method not allowed", http.StatusMethodNotAllowed)
		return
	}
	for k, v := range doc.header {
		w.Header()[k] = append([]string(nil), v...)
	}
	if etag := doc.header.Get("ETag"); etag != "" && etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.Header().Del("Content-Type")
		w.Header().Del("Content-Length")
		w.WriteHeader(http.StatusNotModified) // RFC 9110 §13.1.2
		return
	}
	if w.Header().Get("Content-Length") == "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(doc.body)))
	}
	w.WriteHeader(doc.status)
	if r.Method == http.MethodGet {
		_, _ = w.Write(doc.body)
	}
}

// etagMatch reports whether an If-None-Match value matches etag, using the
// weak comparison RFC 9110 §13.1.2 requires.
func etagMatch(ifNoneMatch, etag string) bool {
	if ifNoneMatch == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, tag := range strings.Split(ifNoneMatch, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == want {
			return true
		}
	}
	return false
}

// SetAgentDocuments serves the agent's client metadata document and key set
// on AgentHost (Poppy 0.1 §4.1), at the paths of their client_id and
// jwks_uri when those are https URLs on AgentHost, else at /agent.json and
// /jwks.json. Documents served by an earlier call at other paths are removed.
func (s *documents) SetAgentDocuments(agentJSON, jwksJSON []byte) {
	var md struct {
		ClientID string `json:"client_id"`
		JWKSURI  string `json:"jwks_uri"`
	}
	_ = json.Unmarshal(agentJSON, &md) // a broken document is served as given
	agentPath := s.agentPath(md.ClientID, "/agent.json")
	jwksPath := s.agentPath(md.JWKSURI, "/jwks.json")

	s.mu.Lock()
	old := s.agentDocs
	s.agentDocs = []string{agentPath, jwksPath}
	s.mu.Unlock()
	for _, p := range old {
		if p != agentPath && p != jwksPath {
			s.removeDocument(s.agentHost, p)
		}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "max-age=60")
	s.SetDocument(s.agentHost, agentPath, http.StatusOK, h, agentJSON)
	s.SetDocument(s.agentHost, jwksPath, http.StatusOK, h, jwksJSON)
	s.forgetClients()
}

// agentPath is the path of rawURL when it is an https URL on AgentHost.
func (s *documents) agentPath(rawURL, def string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || hostOnly(u.Host) != s.agentHost || u.Path == "" {
		return def
	}
	return u.Path
}
