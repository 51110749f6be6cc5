package discovery

import "encoding/json"

// This file holds the wire structs: the documents exactly as a Company publishes
// them. Unknown fields are ignored (Poppy 0.1 §3.3: "MUST ignore ... fields they
// don't recognize").

// Document is poppy.json (Poppy 0.1 §3, §3.1).
type Document struct {
	ProtocolVersion string                     `json:"protocol_version"`
	Organization    *Organization              `json:"organization,omitempty"`
	Auth            *Auth                      `json:"auth,omitempty"`
	Agent           *Agent                     `json:"agent,omitempty"`
	Web             *Web                       `json:"web,omitempty"`
	APIs            []API                      `json:"apis,omitempty"`
	Extensions      map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Organization names the Company and the domain the document speaks for.
type Organization struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
}

// Auth is the Company's OAuth issuer and the sign-in types it offers (§4.4).
type Auth struct {
	Issuer       string            `json:"issuer"`
	Direct       *SignInType       `json:"direct,omitempty"`
	Device       *SignInType       `json:"device,omitempty"`
	Mediated     *Mediated         `json:"mediated,omitempty"`
	CustomScopes map[string]string `json:"custom_scopes,omitempty"`
}

// SignInType lists the scopes one sign-in type can grant (§4.4).
type SignInType struct {
	Scopes []string `json:"scopes"`
}

// Mediated describes Mediated Sign-In (§4.7).
type Mediated struct {
	Endpoint string   `json:"endpoint"`
	Fields   []Field  `json:"fields"`
	Scopes   []string `json:"scopes"`
}

// Field is one credential Mediated Sign-In asks the User for (§4.7).
type Field struct {
	Name   string `json:"name"`
	Label  string `json:"label"`
	Secret bool   `json:"secret"`
}

// Agent is the Company Agent: its conversation protocols (§7.1).
type Agent struct {
	Protocols []Protocol `json:"protocols"`
}

// Protocol is one conversation protocol entry (§7.1).
type Protocol struct {
	Type     string `json:"type"`
	Endpoint string `json:"endpoint"`
}

// Web describes the Company's website (§5).
type Web struct {
	BrowserSessionEndpoint string `json:"browser_session_endpoint,omitempty"`
}

// API is one entry of apis (§6). Resource is set when the Company wants a token
// issued for this service alone (§4.3 "Narrower tokens").
type API struct {
	Type        string `json:"type"`
	URL         string `json:"url"`
	Description string `json:"description"`
	Resource    string `json:"resource,omitempty"`
}

// Extension is the part of an extensions entry every extension shares (§3.3).
type Extension struct {
	Version *json.RawMessage `json:"version"`
}

// Metadata is the issuer's OAuth Authorization Server Metadata (RFC 8414) with
// the Poppy field poppy_domains (§3.2).
type Metadata struct {
	Issuer                      string   `json:"issuer"`
	TokenEndpoint               string   `json:"token_endpoint"`
	RevocationEndpoint          string   `json:"revocation_endpoint"`
	AuthorizationEndpoint       string   `json:"authorization_endpoint,omitempty"`
	DeviceAuthorizationEndpoint string   `json:"device_authorization_endpoint,omitempty"`
	PoppyDomains                []string `json:"poppy_domains"`
}

// ResourceMetadata is an MCP server's OAuth Protected Resource Metadata (RFC 9728).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
}
