// This file lets one Session serve every domain of its Company. Poppy 0.1
// §3.2: "Several domains MAY name the same issuer, such as a Company with a
// domain for each country, and they are then one Company: the same User IDs
// (4.2), Sessions, and Account Tokens apply to all of them." What a domain's
// own poppy.json names stays that domain's: its website's
// browser_session_endpoint, its auth.mediated.endpoint and its MCP servers.

package auth

import "fmt"

// Site is a Session at one domain of its Company: the Session, its tokens
// and its sign-in are the Company's, the endpoints are the domain's. It is
// safe for concurrent use.
type Site struct {
	s *Session
	c Company
}

// At returns the Session at the Company's domain that c describes, from
// that domain's poppy.json. c must name the Session's issuer and token
// endpoint: another issuer is another Company, with Sessions of its own.
func (s *Session) At(c Company) (*Site, error) {
	if c.Issuer != s.company.Issuer || c.TokenEndpoint != s.company.TokenEndpoint {
		return nil, fmt.Errorf("auth: %s names the issuer %q, not the Session's %q (Poppy 0.1 §3.2)", c.Domain, c.Issuer, s.company.Issuer)
	}
	return &Site{s: s, c: c}, nil
}

// site is the Session at the domain it was started through.
func (s *Session) site() *Site { return &Site{s: s, c: s.company} }

// Company returns the domain's view of the Company.
func (w *Site) Company() Company { return w.c }

// Session returns the Session.
func (w *Site) Session() *Session { return w.s }
