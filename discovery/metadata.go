package discovery

// This file implements the checks on the issuer's OAuth Authorization Server
// Metadata (Poppy 0.1 §3.2, RFC 8414) and on MCP servers' Protected Resource
// Metadata (Poppy 0.1 §6, RFC 9728).

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// ParseMetadata decodes RFC 8414 metadata.
func ParseMetadata(data []byte) (*Metadata, []Finding) {
	var md Metadata
	if fs := decode(data, &md, "3.2"); len(fs) > 0 {
		return nil, fs
	}
	return &md, nil
}

// ParseResourceMetadata decodes RFC 9728 metadata.
func ParseResourceMetadata(data []byte) (*ResourceMetadata, []Finding) {
	var md ResourceMetadata
	if fs := decode(data, &md, "6"); len(fs) > 0 {
		return nil, fs
	}
	return &md, nil
}

// MetadataURL is where RFC 8414 §3.1 puts an issuer's metadata: the well-known
// suffix goes between the host and any path of the issuer.
func MetadataURL(issuer string) (string, error) {
	return wellKnown(issuer, "oauth-authorization-server")
}

// ResourceMetadataURL is where RFC 9728 §3.1 puts a resource's metadata.
func ResourceMetadataURL(resource string) (string, error) {
	return wellKnown(resource, "oauth-protected-resource")
}

func wellKnown(raw, suffix string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("discovery: %s is not an HTTPS URL", quote(raw))
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return "https://" + u.Host + "/.well-known/" + suffix + path, nil
}

// CheckMetadata applies §3.2 to the issuer's metadata for doc.
func CheckMetadata(md *Metadata, doc *Document) []Finding {
	var fs findings
	a := doc.Auth
	// Poppy 0.1 §3.2: the agent "MUST check that its issuer exactly matches auth.issuer".
	if md.Issuer != a.Issuer {
		fs.errorf("3.2", "the metadata's issuer %s does not exactly match auth.issuer %s", quote(md.Issuer), quote(a.Issuer))
	}
	// Poppy 0.1 §3.2: "... and that poppy_domains includes organization.domain".
	if doc.Organization != nil && !slices.Contains(md.PoppyDomains, doc.Organization.Domain) {
		fs.errorf("3.2", "the metadata's poppy_domains %s does not include %s", quoteAll(md.PoppyDomains), quote(doc.Organization.Domain))
	}
	endpoint := func(field, value string, required bool, why string) {
		switch {
		case value != "":
			checkHTTPS(&fs, "3.2", field, value)
		case required:
			fs.errorf("3.2", "the metadata has no %s%s", field, why)
		}
	}
	endpoint("token_endpoint", md.TokenEndpoint, true, "")
	endpoint("revocation_endpoint", md.RevocationEndpoint, true, "")
	endpoint("authorization_endpoint", md.AuthorizationEndpoint, a.Direct != nil, ", which auth.direct requires")
	endpoint("device_authorization_endpoint", md.DeviceAuthorizationEndpoint, a.Device != nil, ", which auth.device requires")
	return fs
}

// CheckResourceMetadata applies §6 to an MCP API's protected resource metadata.
func CheckResourceMetadata(md *ResourceMetadata, api API, issuer string) []Finding {
	var fs findings
	// RFC 9728 §3.3: the resource value MUST be identical to the resource the
	// metadata was requested for.
	if md.Resource != api.URL {
		fs.errorf("6", "the protected resource metadata of %s names resource %s (RFC 9728 §3.3)", api.URL, quote(md.Resource))
	}
	// Poppy 0.1 §6: "its authorization_servers MUST include auth.issuer".
	if !slices.Contains(md.AuthorizationServers, issuer) {
		fs.errorf("6", "the protected resource metadata of %s does not list %s in authorization_servers", api.URL, quote(issuer))
	}
	return fs
}
