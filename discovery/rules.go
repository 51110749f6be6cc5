package discovery

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// SupportedMajor is the protocol major version this agent implements.
const SupportedMajor = "0"

var versionRE = regexp.MustCompile(`^([0-9]+)\.([0-9]+)$`)

// knownExtensions are the extensions defined with the protocol (§3.3: "plain names").
var knownExtensions = map[string]bool{"operations": true}

// ParseDocument decodes poppy.json. It returns findings for a body that is not a
// JSON object or has a field of the wrong type; such a document is unusable.
func ParseDocument(data []byte) (*Document, []Finding) {
	var doc Document
	if fs := decode(data, &doc, "3.1"); len(fs) > 0 {
		return nil, fs
	}
	return &doc, nil
}

// decode unmarshals a JSON object, turning errors into findings under section.
func decode(data []byte, v any, section string) []Finding {
	var fs findings
	trimmed := strings.TrimSpace(string(data))
	if !strings.HasPrefix(trimmed, "{") {
		fs.errorf(section, "the document is not a JSON object")
		return fs
	}
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
	case asErr(err, &typeErr):
		fs.errorf(section, "field %s has the wrong type: %s where %s belongs", quote(typeErr.Field), typeErr.Value, typeErr.Type)
	default:
		fs.errorf(section, "the document is not valid JSON: %v", err)
	}
	return fs
}

// CheckDocument applies the rules of §3, §3.1, §3.3 and the scope rules of §4.4
// to a parsed poppy.json fetched for requestedHost (host or host:port as the user
// gave it).
func CheckDocument(doc *Document, requestedHost string) []Finding {
	var fs findings
	checkVersion(&fs, doc.ProtocolVersion)
	checkOrganization(&fs, doc.Organization, requestedHost)
	checkPresence(&fs, doc)
	if doc.Auth != nil {
		checkAuth(&fs, doc.Auth)
	}
	if doc.Agent != nil {
		checkAgent(&fs, doc.Agent)
	}
	if doc.Web != nil && doc.Web.BrowserSessionEndpoint != "" {
		checkHTTPS(&fs, "3.1", "web.browser_session_endpoint", doc.Web.BrowserSessionEndpoint)
	}
	checkAPIs(&fs, doc.APIs)
	checkExtensions(&fs, doc.Extensions)
	return fs
}

func checkVersion(fs *findings, v string) {
	m := versionRE.FindStringSubmatch(v)
	switch {
	case v == "":
		fs.errorf("3.1", "protocol_version is missing")
	case m == nil:
		fs.errorf("3.1", "protocol_version %s is not major.minor", quote(v))
	case m[1] != SupportedMajor:
		// Poppy 0.1 §3.1: agents must not use a document whose major version they don't support.
		fs.errorf("3.1", "protocol_version %s has major version %s; this agent supports %s.x", quote(v), m[1], SupportedMajor)
	}
}

func checkOrganization(fs *findings, org *Organization, requestedHost string) {
	if org == nil {
		fs.errorf("3.1", "organization is missing")
		return
	}
	if strings.TrimSpace(org.Name) == "" {
		fs.errorf("3.1", "organization.name is missing")
	}
	if org.Domain == "" {
		fs.errorf("3.1", "organization.domain is missing")
		return
	}
	// Poppy 0.1 §3: "The document still speaks for the domain the Personal Agent
	// requested"; §3.1: the domain matches the requested host, ignoring a leading www.
	if SameDomain(org.Domain, requestedHost) {
		return
	}
	fs.errorf("3.1", "organization.domain %s does not match the requested domain %s", quote(org.Domain), quote(hostOnly(requestedHost)))
}

// SameDomain reports whether two domains are the same, ignoring case, a port,
// a trailing dot and a leading "www." on either side (§3.1).
func SameDomain(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.ToLower(hostOnly(s)), ".")
		return strings.TrimPrefix(s, "www.")
	}
	return norm(a) != "" && norm(a) == norm(b)
}

// hostOnly strips a port from host[:port].
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func checkPresence(fs *findings, doc *Document) {
	hasWeb := doc.Web != nil
	if doc.Agent == nil && len(doc.APIs) == 0 && !hasWeb {
		fs.errorf("3.1", "the document lists none of agent, apis or web")
	}
	needsAuth := doc.Agent != nil || len(doc.APIs) > 0 || (hasWeb && doc.Web.BrowserSessionEndpoint != "")
	if needsAuth && doc.Auth == nil {
		fs.errorf("3.1", "auth is missing, but it is required when agent, apis or web.browser_session_endpoint is listed")
	}
}

func checkAuth(fs *findings, a *Auth) {
	if a.Issuer == "" {
		fs.errorf("3.1", "auth.issuer is missing")
	} else if checkHTTPS(fs, "3.1", "auth.issuer", a.Issuer) {
		if u, _ := url.Parse(a.Issuer); u.RawQuery != "" || u.Fragment != "" {
			fs.errorf("3.2", "auth.issuer %s has a query or fragment (RFC 8414 §2)", quote(a.Issuer))
		}
	}
	types := []struct {
		name string
		t    *SignInType
	}{{"direct", a.Direct}, {"device", a.Device}}
	for _, st := range types {
		if st.t != nil {
			checkScopes(fs, "auth."+st.name+".scopes", st.t.Scopes, a.CustomScopes)
		}
	}
	if a.Mediated != nil {
		checkMediated(fs, a.Mediated, a.CustomScopes)
	}
	for name := range a.CustomScopes {
		if strings.HasPrefix(name, "poppy:") {
			// Poppy 0.1 §4.4: "Names starting with poppy: are reserved for this protocol".
			fs.errorf("4.4", "auth.custom_scopes defines %s, but names starting with poppy: are reserved", quote(name))
		}
	}
}

func checkMediated(fs *findings, m *Mediated, custom map[string]string) {
	if m.Endpoint == "" {
		fs.errorf("4.7", "auth.mediated.endpoint is missing")
	} else {
		checkHTTPS(fs, "4.7", "auth.mediated.endpoint", m.Endpoint)
	}
	if len(m.Fields) == 0 {
		fs.errorf("4.7", "auth.mediated.fields is empty")
	}
	seen := map[string]bool{}
	for i, f := range m.Fields {
		switch {
		case f.Name == "":
			fs.errorf("4.7", "auth.mediated.fields[%d] has no name", i)
		case seen[f.Name]:
			fs.errorf("4.7", "auth.mediated.fields names %s twice", quote(f.Name))
		case f.Label == "":
			fs.warnf("4.7", "auth.mediated.fields %s has no label to ask the User with", quote(f.Name))
		}
		seen[f.Name] = true
	}
	checkScopes(fs, "auth.mediated.scopes", m.Scopes, custom)
}

// checkScopes applies §4.4 to the scopes one sign-in type can grant.
func checkScopes(fs *findings, field string, scopes []string, custom map[string]string) {
	if len(scopes) == 0 {
		fs.errorf("4.4", "%s is empty: each sign-in type lists the scopes it can grant", field)
	}
	for _, s := range scopes {
		switch {
		case s == "poppy:read" || s == "poppy:write":
		case strings.HasPrefix(s, "poppy:"):
			fs.errorf("4.4", "%s lists %s, but only poppy:read and poppy:write may start with poppy:", field, quote(s))
		case s == "" || strings.ContainsAny(s, " \t\"\\"):
			fs.errorf("4.4", "%s lists %s, which is not a valid OAuth scope", field, quote(s))
		case custom[s] == "":
			fs.warnf("4.4", "%s lists %s, which auth.custom_scopes does not describe", field, quote(s))
		}
	}
}

// checkAgent checks the conversation protocols. Only poppy entries are
// used, so only theirs can block use: an unfamiliar entry is skipped
// whatever its endpoint.
func checkAgent(fs *findings, a *Agent) {
	if len(a.Protocols) == 0 {
		fs.skippedf("7.1", "agent.protocols is empty: conversations are not available")
	}
	supported := false
	for i, p := range a.Protocols {
		if p.Type != "poppy" {
			// Poppy 0.1 §7.1: the agent "skips unfamiliar types".
			fs.warnf("7.1", "agent.protocols[%d] has type %s, which this agent does not support: skipped", i, quote(p.Type))
			continue
		}
		supported = true
		field := fmt.Sprintf("agent.protocols[%d].endpoint", i)
		if p.Endpoint == "" {
			fs.errorf("7.1", "%s is missing", field)
		} else {
			checkHTTPS(fs, "7.1", field, p.Endpoint)
		}
	}
	if len(a.Protocols) > 0 && !supported {
		fs.warnf("7.1", "agent.protocols has no poppy entry: conversations are not available")
	}
}

func checkAPIs(fs *findings, apis []API) {
	for i, a := range apis {
		field := fmt.Sprintf("apis[%d]", i)
		switch a.Type {
		case "openapi", "mcp":
		default:
			// Poppy 0.1 §6: "Personal Agents SHOULD skip API types they don't recognize".
			fs.warnf("6", "%s has type %s, which this agent does not recognize: skipped", field, quote(a.Type))
			continue
		}
		if a.URL == "" {
			fs.errorf("3.1", "%s.url is missing", field)
		} else {
			checkHTTPS(fs, "3.1", field+".url", a.URL)
		}
		if a.Resource != "" {
			checkHTTPS(fs, "4.3", field+".resource", a.Resource)
		}
		if strings.TrimSpace(a.Description) == "" {
			fs.warnf("3.1", "%s has no description", field)
		}
	}
}

// checkExtensions checks the extensions. This agent supports none, so
// each is skipped: a broken entry is still the Company's error to fix, but
// it blocks nothing (Poppy 0.1 §3.3: "Personal Agents and Companies MUST
// ignore extensions they don't support").
func checkExtensions(fs *findings, exts map[string]json.RawMessage) {
	for name, raw := range exts {
		if !knownExtensions[name] && !domainPrefixed(name) {
			// Poppy 0.1 §3.3: "Anyone else MUST start an extension's name with a domain they control".
			fs.skippedf("3.3", "extension %s is neither defined with the protocol nor starts with a domain", quote(name))
		}
		var e Extension
		if json.Unmarshal(raw, &e) != nil {
			fs.skippedf("3.3", "extension %s is not an object", quote(name))
			continue
		}
		if e.Version == nil {
			// Poppy 0.1 §3.3: "Each entry has a version, the extension's major version."
			fs.skippedf("3.3", "extension %s has no version", quote(name))
		}
	}
}

// domainPrefixed reports whether an extension name starts with a domain, as in
// "example.com/gift-wrap".
func domainPrefixed(name string) bool {
	host, rest, ok := strings.Cut(name, "/")
	if !ok || rest == "" || !strings.Contains(host, ".") {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// isHTTPSURL reports whether raw is an absolute HTTPS URL with a host.
func isHTTPSURL(raw string) bool {
	var fs findings
	return checkHTTPS(&fs, "", "", raw)
}

// checkHTTPS reports a URL that is not an absolute HTTPS URL. Poppy 0.1 §3:
// every Poppy URL is HTTPS. It reports whether the URL passed.
func checkHTTPS(fs *findings, section, field, raw string) bool {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		fs.errorf(section, "%s %s is not a URL", field, quote(raw))
	case u.Scheme != "https":
		fs.errorf(section, "%s %s is not an HTTPS URL", field, quote(raw))
	case u.Host == "" || u.User != nil:
		fs.errorf(section, "%s %s has no valid host", field, quote(raw))
	default:
		return true
	}
	return false
}
