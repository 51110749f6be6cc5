package mcpauth

// This file finds the authorization server's signing keys: its metadata
// (RFC 8414, or OpenID Connect Discovery 1.0) names its jwks_uri, and the
// key set there is kept, refetched when it grows old and, at most once per
// KeyRefreshInterval, when a token names a key it does not hold (the
// issuer rotated its keys). Both documents are public documents, fetched
// like a Company's: over HTTPS only, through the network guard, capped.

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// maxKeyDocument caps the metadata and the key set.
const maxKeyDocument = 256 << 10

// keysMaxAge is how long a fetched key set is used before it is fetched
// again (a failed refetch keeps the old one).
const keysMaxAge = time.Hour

// minRSABits is the smallest RSA key accepted (RFC 7518 §3.3: "A key of
// size 2048 bits or larger MUST be used with these algorithms").
const minRSABits = 2048

// issuerMetadata is what mcpauth reads of the authorization server's
// metadata.
type issuerMetadata struct {
	Issuer                string   `json:"issuer"`
	JWKSURI               string   `json:"jwks_uri"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	// RFC 9207 §3: when true, authorization responses carry iss.
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

// metadataURLs are where the metadata of issuer may be, in the order the
// MCP authorization specification has clients try them: RFC 8414 §3.1
// (the well-known path inserted before the issuer's path), then OpenID
// Connect Discovery 1.0 §4 (inserted, then appended).
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	origin, path := u.Scheme+"://"+u.Host, strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

// parseIssuerMetadata reads a metadata document of issuer.
func parseIssuerMetadata(body []byte, issuer string) (*issuerMetadata, error) {
	var m issuerMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	// RFC 8414 §3.3: "The issuer value returned MUST be identical to the
	// authorization server's issuer identifier value"; OIDC Discovery §4.3 alike.
	if m.Issuer != issuer {
		return nil, fmt.Errorf("its issuer %q is not %q", m.Issuer, issuer)
	}
	if !isHTTPS(m.JWKSURI) {
		return nil, fmt.Errorf("its jwks_uri %q is not an https URL", m.JWKSURI)
	}
	for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint} {
		if e != "" && !isHTTPS(e) {
			return nil, fmt.Errorf("its endpoint %q is not an https URL", e)
		}
	}
	return &m, nil
}

// parseKeySet reads a JWK Set (RFC 7517 §5), keeping the public signing
// keys it can use and skipping the others (encryption keys, symmetric
// keys, private keys, short RSA keys, kinds it does not know), so one odd
// key does not cost the rest.
func parseKeySet(body []byte) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if k.UnmarshalJSON(raw) != nil || !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < minRSABits {
				continue
			}
		case *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue // an "oct" key is a shared secret: never a signature key here
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// fits reports whether k may verify a signature made with alg.
func fits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false // RFC 7517 §4.4: the key is meant for another algorithm
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(string(alg), "RS") || strings.HasPrefix(string(alg), "PS")
	case *ecdsa.PublicKey:
		curve := map[jose.SignatureAlgorithm]string{jose.ES256: "P-256", jose.ES384: "P-384", jose.ES512: "P-521"}[alg]
		return curve != "" && pub.Curve.Params().Name == curve
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// keySet holds the issuer's metadata and keys. It is safe for concurrent use.
type keySet struct {
	issuer     string
	docs       *discovery.Client
	now        func() time.Time
	minRefresh time.Duration

	// fetching is held while the documents are fetched, so that callers
	// waiting for keys cause one fetch, not one each.
	fetching sync.Mutex

	// mu guards the fields below.
	mu       sync.Mutex
	meta     *issuerMetadata
	keys     []jose.JSONWebKey
	fetched  time.Time // when keys were fetched; zero: never
	tried    time.Time // when a fetch was last tried
	attempts int       // fetches finished, so callers that waited for one do not repeat it
}

// lookup returns the keys that may have signed a token with kid and alg:
// those with that kid ("" matches any), fetching the set when there is
// none yet or it is old, and again, at most once per minRefresh, when none
// fits.
func (k *keySet) lookup(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	keys, fetched, _, seen := k.state()
	if fetched.IsZero() || k.now().Sub(fetched) > keysMaxAge {
		err := k.refresh(ctx, false, seen) // a failed refetch keeps the keys held
		if keys, fetched, _, seen = k.state(); fetched.IsZero() {
			if err == nil { // another caller's fetch, which failed
				err = &Error{Status: ErrUnavailable.Status, Description: "the issuer's keys could not be fetched"}
			}
			return nil, err
		}
	}
	if found := matching(keys, kid, alg); len(found) > 0 {
		return found, nil
	}
	if _, _, tried, _ := k.state(); k.now().Sub(tried) >= k.minRefresh {
		// An unknown key: the issuer may have rotated. Asked at most once
		// per minRefresh, so that made-up key IDs cannot make poppy-mcp
		// hammer the issuer.
		if err := k.refresh(ctx, true, seen); err == nil {
			keys, _, _, _ = k.state()
		}
	}
	if found := matching(keys, kid, alg); len(found) > 0 {
		return found, nil
	}
	return nil, invalidToken("the token is signed with a key the issuer does not publish")
}

func matching(keys []jose.JSONWebKey, kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	var found []jose.JSONWebKey
	for _, key := range keys {
		if (kid == "" || key.KeyID == kid) && fits(key, alg) {
			found = append(found, key)
		}
	}
	return found
}

// state is the keys, when they were fetched, when a fetch was last tried,
// and how many were.
func (k *keySet) state() ([]jose.JSONWebKey, time.Time, time.Time, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.fetched, k.tried, k.attempts
}

// metadata returns the issuer's metadata, fetching it (and the keys) the
// first time.
func (k *keySet) metadata(ctx context.Context) (*issuerMetadata, error) {
	k.mu.Lock()
	m, seen := k.meta, k.attempts
	k.mu.Unlock()
	if m != nil {
		return m, nil
	}
	err := k.refresh(ctx, false, seen)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.meta == nil && err == nil { // another caller's fetch, which failed
		err = &Error{Status: ErrUnavailable.Status, Description: "no usable metadata for the issuer " + k.issuer}
	}
	return k.meta, err
}

// refresh fetches the metadata (until it has it once) and the key set,
// unless a fetch was tried since the caller saw seen attempts: then the
// caller uses that one. revalidate asks past any cached copy (the key the
// token names is new).
func (k *keySet) refresh(ctx context.Context, revalidate bool, seen int) error {
	// Others may wait for this fetch: a client that goes away does not end
	// it (the document fetcher bounds it in time).
	ctx = context.WithoutCancel(ctx)
	k.fetching.Lock()
	defer k.fetching.Unlock()
	k.mu.Lock()
	if k.attempts != seen {
		k.mu.Unlock()
		return nil // fetched while this caller waited
	}
	k.tried = k.now()
	m := k.meta
	k.mu.Unlock()
	defer func() { // counted once done, so that those who waited for it see it
		k.mu.Lock()
		k.attempts++
		k.mu.Unlock()
	}()
	var err error
	if m == nil {
		if m, err = k.fetchMetadata(ctx); err != nil {
			return err
		}
	}
	body, err := k.fetch(ctx, m.JWKSURI, revalidate)
	if err != nil {
		return err
	}
	keys, err := parseKeySet(body)
	if err != nil {
		return &Error{Status: ErrUnavailable.Status, Description: "the issuer's jwks_uri " + m.JWKSURI + " is unusable", Err: err}
	}
	k.mu.Lock()
	k.meta, k.keys, k.fetched = m, keys, k.now()
	k.mu.Unlock()
	return nil
}

// fetchMetadata finds the issuer's metadata at the first well-known URL
// that has it.
func (k *keySet) fetchMetadata(ctx context.Context) (*issuerMetadata, error) {
	var errs []error
	for _, u := range metadataURLs(k.issuer) {
		body, err := k.fetch(ctx, u, false)
		if err == nil {
			m, perr := parseIssuerMetadata(body, k.issuer)
			if perr == nil {
				return m, nil
			}
			err = fmt.Errorf("%s: %w", u, perr)
		}
		errs = append(errs, err)
	}
	return nil, &Error{Status: ErrUnavailable.Status, Description: "no usable metadata for the issuer " + k.issuer, Err: errors.Join(errs...)}
}

// fetch GETs a public JSON document.
func (k *keySet) fetch(ctx context.Context, u string, revalidate bool) ([]byte, error) {
	f, err := k.docs.FetchDocument(ctx, discovery.DocumentRequest{URL: u, MaxBytes: maxKeyDocument, Refresh: revalidate,
		Accept: "application/json, application/jwk-set+json"})
	if err != nil {
		return nil, &Error{Status: ErrUnavailable.Status, Description: "fetching " + u, Err: err}
	}
	if mt, _, _ := mime.ParseMediaType(f.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return nil, &Error{Status: ErrUnavailable.Status, Description: fmt.Sprintf("%s is served as %q, not JSON", u, mt)}
	}
	return f.Body, nil
}

// isHTTPS reports whether s is an absolute https URL.
func isHTTPS(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != ""
}

// ready reports nil when the metadata and keys were fetched within
// keysMaxAge. When they are older, or were never fetched, it fetches them,
// waiting until ctx ends (the fetch goes on for those who come after).
func (k *keySet) ready(ctx context.Context) error {
	_, fetched, _, seen := k.state()
	if !fetched.IsZero() && k.now().Sub(fetched) <= keysMaxAge {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- k.refresh(ctx, false, seen) }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return &Error{Status: ErrUnavailable.Status, Description: "the issuer's keys are still being fetched"}
	}
	if _, fetched, _, _ = k.state(); fetched.IsZero() || k.now().Sub(fetched) > keysMaxAge {
		return &Error{Status: ErrUnavailable.Status, Description: "the issuer's keys could not be fetched"} // another caller's fetch failed
	}
	return nil
}
