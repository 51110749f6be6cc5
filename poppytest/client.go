package poppytest

// This file learns who a Personal Agent is: it fetches and checks the
// client metadata document at its client_id and the key set at its jwks_uri
// (Poppy 0.1 §4.1, the OAuth Client ID Metadata Document draft), and
// verifies JWTs the agent signs with those keys.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// clientCacheTTL is how long a fetched client document is used.
// SetAgentDocuments empties the cache.
const clientCacheTTL = time.Minute

// maxAgentDocument bounds a fetched client metadata document or key set.
const maxAgentDocument = 64 << 10

// assertionAlgs are the algorithms accepted on agent-signed JWTs.
var assertionAlgs = []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA}

// client is a Personal Agent as its metadata document describes it. It is
// immutable once made.
type client struct {
	id           string
	name         string
	redirectURIs []string
	keys         []jose.JSONWebKey
	fetched      time.Time // set by loadClient
}

// clientDoc is the wire form of the client metadata document.
type clientDoc struct {
	ClientID     string   `json:"client_id"`
	ClientName   string   `json:"client_name"`
	JWKSURI      string   `json:"jwks_uri"`
	RedirectURIs []string `json:"redirect_uris"`
	AuthMethod   string   `json:"token_endpoint_auth_method"`
}

// loadClient returns the agent at clientID, from the cache unless refetch
// is set, and whether it came from the cache. A document that breaks §4.1 is
// the agent's violation and invalid_client.
func (s *clientAuth) loadClient(r *http.Request, clientID string, refetch bool) (*client, bool, *oauthError) {
	if s.opts.ClientID != "" && clientID != s.opts.ClientID {
		// Not the agent's bug: another test's agent came to this Company.
		return nil, false, newError("invalid_client", "poppytest: this Company serves only the agent %s, not %s", s.opts.ClientID, clientID)
	}
	now := s.timeNow()
	s.mu.Lock()
	c := s.clients[clientID]
	s.mu.Unlock()
	if c != nil && !refetch && now.Sub(c.fetched) < clientCacheTTL {
		return c, true, nil
	}
	c, e := s.fetchClient(r, clientID)
	if e != nil {
		return nil, false, e
	}
	c.fetched = now
	s.mu.Lock()
	s.clients[clientID] = c
	s.mu.Unlock()
	return c, false, nil
}

// fetchClient fetches and checks the agent's documents.
func (s *clientAuth) fetchClient(r *http.Request, clientID string) (*client, *oauthError) {
	u, err := url.Parse(clientID)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		// Poppy 0.1 §4.1: "A Personal Agent's client_id MUST be an HTTPS URL that returns its metadata document."
		return nil, s.agentBug(r, "4.1", "invalid_client", "client_id %q is not an https URL", clientID)
	}
	var doc clientDoc
	if err := s.fetchAgentJSON(contextOf(r), clientID, &doc); err != nil {
		return nil, s.agentBug(r, "4.1", "invalid_client", "client metadata at %s: %v", clientID, err)
	}
	if e := s.checkClientDoc(r, clientID, u, &doc); e != nil {
		return nil, e
	}
	keys, e := s.fetchKeys(r, doc.JWKSURI)
	if e != nil {
		return nil, e
	}
	return &client{id: clientID, name: doc.ClientName, redirectURIs: doc.RedirectURIs, keys: keys}, nil
}

// checkClientDoc applies the §4.1 rules to a fetched client metadata document.
func (s *clientAuth) checkClientDoc(r *http.Request, clientID string, u *url.URL, doc *clientDoc) *oauthError {
	if doc.ClientID != clientID {
		// Poppy 0.1 §4.1: "client_id MUST equal the URL the document was fetched from."
		return s.agentBug(r, "4.1", "invalid_client", "client metadata at %s names client_id %q", clientID, doc.ClientID)
	}
	for _, raw := range append([]string{doc.JWKSURI}, doc.RedirectURIs...) {
		// Poppy 0.1 §4.1: "jwks_uri and every entry in redirect_uris MUST be HTTPS URLs on the same domain as client_id."
		v, err := url.Parse(raw)
		if err != nil || v.Scheme != "https" || !sameDomain(hostOnly(v.Host), hostOnly(u.Host)) {
			return s.agentBug(r, "4.1", "invalid_client", "client metadata at %s: %q is not an https URL on the client_id's domain", clientID, raw)
		}
	}
	if doc.AuthMethod != "" && doc.AuthMethod != "private_key_jwt" {
		return s.agentBug(r, "4.1", "invalid_client", "client metadata at %s: token_endpoint_auth_method %q, want private_key_jwt", clientID, doc.AuthMethod)
	}
	return nil
}

// sameDomain reports whether one host is the other or a subdomain of it.
func sameDomain(a, b string) bool {
	return a == b || strings.HasSuffix(a, "."+b) || strings.HasSuffix(b, "."+a)
}

// privateJWKMembers are the members only a private or symmetric JWK has.
var privateJWKMembers = []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"}

// fetchKeys fetches the agent's key set and keeps its signing keys.
func (s *clientAuth) fetchKeys(r *http.Request, jwksURI string) ([]jose.JSONWebKey, *oauthError) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := s.fetchAgentJSON(contextOf(r), jwksURI, &set); err != nil {
		return nil, s.agentBug(r, "4.1", "invalid_client", "key set at %s: %v", jwksURI, err)
	}
	var keys []jose.JSONWebKey
	for i, raw := range set.Keys {
		var members map[string]any
		_ = json.Unmarshal(raw, &members)
		for _, m := range privateJWKMembers {
			if _, ok := members[m]; ok {
				// Poppy 0.1 §4.1: "The key set contains only public keys."
				return nil, s.agentBug(r, "4.1", "invalid_client", "key %d at %s has private member %q", i, jwksURI, m)
			}
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.IsPublic() {
			return nil, s.agentBug(r, "4.1", "invalid_client", "key %d at %s is not a public JWK: %v", i, jwksURI, err)
		}
		if k.Use != "enc" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, s.agentBug(r, "4.1", "invalid_client", "key set at %s has no signing key", jwksURI)
	}
	return keys, nil
}

// fetchAgentJSON GETs an agent document, without following redirects, and
// decodes it. It reads at most maxAgentDocument bytes.
func (s *clientAuth) fetchAgentJSON(ctx context.Context, rawURL string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	c := *s.client
	if s.opts.AgentClient != nil {
		c = *s.opts.AgentClient
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return fmt.Errorf("content type %q, want application/json", resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentDocument+1))
	if err != nil {
		return err
	}
	if len(body) > maxAgentDocument {
		return fmt.Errorf("larger than %d bytes", maxAgentDocument)
	}
	return json.Unmarshal(body, v)
}

// forgetClients empties the client cache, so changed agent documents are
// fetched again.
func (s *clientAuth) forgetClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.clients)
}

// verifyJWT checks the signature of a compact JWS with one of keys (the one
// its kid names, if it names one) and returns its header and payload.
func verifyJWT(raw string, keys []jose.JSONWebKey) (jose.Header, []byte, error) {
	jws, err := jose.ParseSignedCompact(raw, assertionAlgs)
	if err != nil {
		return jose.Header{}, nil, fmt.Errorf("not a compact JWS signed with %v: %w", assertionAlgs, err)
	}
	if len(jws.Signatures) != 1 {
		return jose.Header{}, nil, errors.New("not one signature")
	}
	h := jws.Signatures[0].Protected
	for _, k := range keys {
		if h.KeyID != "" && k.KeyID != h.KeyID {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if payload, err := jws.Verify(k.Key); err == nil {
			return h, payload, nil
		}
	}
	if h.KeyID != "" {
		return h, nil, fmt.Errorf("no key with kid %q verifies the signature", h.KeyID)
	}
	return h, nil, errors.New("no key in the key set verifies the signature")
}

// headerType is the typ of a JWS header, or "".
func headerType(h jose.Header) string {
	typ, _ := h.ExtraHeaders[jose.HeaderType].(string)
	return typ
}
