// This file implements the agent's identity (Poppy 0.1 §4.1): its client_id,
// its signing keys with rotation, and the two documents it publishes, the
// client metadata document (agent.json, OAuth Client ID Metadata Document
// draft) and its key set (jwks.json, RFC 7517 §5).

package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// SecretStore keeps named secrets. The store package's *store.Store
// satisfies it. Secret must return an error matching
// errors.Is(err, ErrNotFound) for a name never put.
type SecretStore interface {
	PutSecret(ctx context.Context, name string, value []byte) error
	Secret(ctx context.Context, name string) ([]byte, error)
}

// ErrNotFound is store.ErrNotFound, what a SecretStore returns for a
// missing secret.
var ErrNotFound = store.ErrNotFound

// DefaultRetireAfter is how long a rotated-out key stays in jwks.json.
const DefaultRetireAfter = 7 * 24 * time.Hour

// identitySecret names the identity's keys in the SecretStore.
const identitySecret = "agent-key"

// IdentityOptions configures NewIdentity. A nil *IdentityOptions means all defaults.
type IdentityOptions struct {
	// ClientName is client_name in agent.json. Zero: "poppy-mcp".
	ClientName string
	// LogoURI is logo_uri in agent.json. Zero: omitted.
	LogoURI string
	// JWKSURI is jwks_uri. Zero: "jwks.json" resolved against the client_id.
	JWKSURI string
	// RedirectURIs are the Direct Sign-In callbacks. Zero: none.
	RedirectURIs []string
	// Extensions lists the extensions the agent supports, name to version
	// (Poppy 0.1 §3.3). Zero: an empty object.
	Extensions map[string]string
	// RetireAfter is how long a rotated-out public key stays in jwks.json.
	// Zero: DefaultRetireAfter (7 days).
	RetireAfter time.Duration
	// Store persists the signing keys. Zero: keys live in memory only.
	Store SecretStore
	// MustExist makes NewIdentity fail with ErrNoIdentity instead of creating
	// a key when Store holds none: a key nobody published is of no use, so
	// `serve` loads the key `init` made and never makes its own.
	MustExist bool
}

// ErrNoIdentity is returned by NewIdentity with MustExist when the store holds
// no signing key yet.
var ErrNoIdentity = errors.New("auth: no agent identity in the state directory (run poppy-mcp init)")

// HasSigningKey reports whether st holds the agent's signing key, as
// NewIdentity stores it, without loading it: whether an identity was made
// there, whatever client_id it was made for.
func HasSigningKey(ctx context.Context, st SecretStore) (bool, error) {
	_, err := st.Secret(ctx, identitySecret)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("auth: load identity: %w", err)
	}
	return true, nil
}

// Identity is the Personal Agent's identity: its client_id and signing keys.
// It is safe for concurrent use.
type Identity struct {
	clientID string
	meta     ClientMetadata
	retire   time.Duration
	store    SecretStore
	now      func() time.Time
	// mustExist refuses to create a key on load (IdentityOptions.MustExist).
	mustExist bool

	// mu guards current, headers and retired.
	mu      sync.Mutex
	current *Key
	headers map[string]string // typ -> encoded protected header for current
	retired []retiredKey
}

type retiredKey struct {
	key   jose.JSONWebKey // public
	until time.Time
}

// ClientMetadata is agent.json, the client metadata document at client_id.
type ClientMetadata struct {
	ClientID                string                      `json:"client_id"`
	ClientName              string                      `json:"client_name"`
	LogoURI                 string                      `json:"logo_uri,omitempty"`
	JWKSURI                 string                      `json:"jwks_uri"`
	RedirectURIs            []string                    `json:"redirect_uris"`
	TokenEndpointAuthMethod string                      `json:"token_endpoint_auth_method"`
	Extensions              map[string]ExtensionVersion `json:"extensions"`
}

// ExtensionVersion is one entry of extensions (Poppy 0.1 §3.3).
type ExtensionVersion struct {
	Version string `json:"version"`
}

// NewIdentity loads the identity's keys from opts.Store, or creates and
// stores a new key when there are none, and checks the URLs (Poppy 0.1 §4.1).
func NewIdentity(ctx context.Context, clientID string, opts *IdentityOptions) (*Identity, error) {
	if opts == nil {
		opts = &IdentityOptions{}
	}
	meta, err := buildMetadata(clientID, opts)
	if err != nil {
		return nil, err
	}
	id := &Identity{clientID: clientID, meta: meta, retire: opts.RetireAfter, store: opts.Store, now: timeNow, mustExist: opts.MustExist}
	if id.retire <= 0 {
		id.retire = DefaultRetireAfter
	}
	if err := id.load(ctx); err != nil {
		return nil, err
	}
	return id, nil
}

func buildMetadata(clientID string, opts *IdentityOptions) (ClientMetadata, error) {
	m := ClientMetadata{
		ClientID:                clientID,
		ClientName:              opts.ClientName,
		LogoURI:                 opts.LogoURI,
		JWKSURI:                 opts.JWKSURI,
		RedirectURIs:            append([]string{}, opts.RedirectURIs...),
		TokenEndpointAuthMethod: "private_key_jwt", // Poppy 0.1 §4.1, RFC 7523
		Extensions:              map[string]ExtensionVersion{},
	}
	if m.ClientName == "" {
		m.ClientName = "poppy-mcp"
	}
	for name, v := range opts.Extensions {
		m.Extensions[name] = ExtensionVersion{Version: v}
	}
	// Poppy 0.1 §4.1: "A Personal Agent's client_id MUST be an HTTPS URL"
	base, err := httpsURL("client_id", clientID)
	if err != nil {
		return m, err
	}
	if m.JWKSURI == "" {
		m.JWKSURI = base.ResolveReference(&url.URL{Path: "jwks.json"}).String()
	}
	// Poppy 0.1 §4.1: "jwks_uri and every entry in redirect_uris MUST be HTTPS
	// URLs on the same domain as client_id."
	for _, u := range append([]string{m.JWKSURI}, m.RedirectURIs...) {
		if err := sameHost(base, u); err != nil {
			return m, err
		}
	}
	return m, nil
}

func httpsURL(what, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("auth: %s %q is not an HTTPS URL", what, s)
	}
	return u, nil
}

func sameHost(base *url.URL, s string) error {
	u, err := httpsURL("URL", s)
	if err != nil {
		return err
	}
	if !strings.EqualFold(u.Hostname(), base.Hostname()) {
		return fmt.Errorf("auth: %q is not on the client_id's host %q (Poppy 0.1 §4.1)", s, base.Hostname())
	}
	return nil
}

// ClientID returns the agent's client_id.
func (id *Identity) ClientID() string { return id.clientID }

// Metadata returns agent.json's contents.
func (id *Identity) Metadata() ClientMetadata {
	m := id.meta
	m.RedirectURIs = append([]string{}, m.RedirectURIs...)
	return m
}

// AgentJSON returns agent.json, to publish at client_id.
func (id *Identity) AgentJSON() ([]byte, error) {
	b, err := json.MarshalIndent(id.Metadata(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("auth: agent.json: %w", err)
	}
	return b, nil
}

// JWKS returns the public key set: the current key and every rotated-out key
// whose retire time has not passed.
// Poppy 0.1 §4.1: "The key set contains only public keys."
func (id *Identity) JWKS() jose.JSONWebKeySet {
	id.mu.Lock()
	defer id.mu.Unlock()
	now := id.now()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{id.current.Public()}}
	for _, r := range id.retired {
		if now.Before(r.until) {
			set.Keys = append(set.Keys, r.key)
		}
	}
	return set
}

// JWKSJSON returns jwks.json, to publish at jwks_uri.
func (id *Identity) JWKSJSON() ([]byte, error) {
	b, err := json.MarshalIndent(id.JWKS(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("auth: jwks.json: %w", err)
	}
	return b, nil
}

// CurrentKeyID returns the kid of the key that signs now.
func (id *Identity) CurrentKeyID() string {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.current.KeyID()
}

// Rotate makes a new current signing key. The old public key stays in
// jwks.json for RetireAfter, so assertions a Company may still be checking
// keep verifying; then it is dropped. The new state is stored before it is
// used.
func (id *Identity) Rotate(ctx context.Context) error {
	k, err := GenerateKey()
	if err != nil {
		return err
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	now := id.now()
	retired := []retiredKey{{key: id.current.Public(), until: now.Add(id.retire)}}
	for _, r := range id.retired {
		if now.Before(r.until) {
			retired = append(retired, r)
		}
	}
	if err := id.save(ctx, k, retired); err != nil {
		return err
	}
	id.setCurrent(k)
	id.retired = retired
	return nil
}

// signingKey returns the current key and its encoded header for typ.
func (id *Identity) signingKey(typ string) (*Key, string) {
	id.mu.Lock()
	defer id.mu.Unlock()
	h, ok := id.headers[typ]
	if !ok {
		h = id.current.encodeHeader(typ, false)
		id.headers[typ] = h
	}
	return id.current, h
}

func (id *Identity) setCurrent(k *Key) {
	id.current = k
	id.headers = map[string]string{}
}

// identityWire is how the keys are kept in the SecretStore.
type identityWire struct {
	Current json.RawMessage `json:"current"` // private JWK
	Retired []retiredWire   `json:"retired,omitempty"`
}

type retiredWire struct {
	Key   jose.JSONWebKey `json:"key"`
	Until time.Time       `json:"until"`
}

func (id *Identity) load(ctx context.Context) error {
	if id.store == nil {
		k, err := GenerateKey()
		if err != nil {
			return err
		}
		id.setCurrent(k)
		return nil
	}
	b, err := id.store.Secret(ctx, identitySecret)
	if isNotFound(err) && id.mustExist {
		return ErrNoIdentity
	}
	if isNotFound(err) {
		k, err := GenerateKey()
		if err != nil {
			return err
		}
		if err := id.save(ctx, k, nil); err != nil {
			return err
		}
		id.setCurrent(k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: load identity: %w", err)
	}
	return id.decode(b)
}

func (id *Identity) decode(b []byte) error {
	var w identityWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("auth: load identity: %w", err)
	}
	k, err := ParseKey(w.Current)
	if err != nil {
		return err
	}
	id.setCurrent(k)
	for _, r := range w.Retired {
		if !r.Key.IsPublic() || !r.Key.Valid() {
			return errors.New("auth: load identity: a retired key is not a valid public key")
		}
		id.retired = append(id.retired, retiredKey{key: r.Key, until: r.Until})
	}
	return nil
}

func (id *Identity) save(ctx context.Context, current *Key, retired []retiredKey) error {
	if id.store == nil {
		return nil
	}
	priv, err := current.MarshalPrivate()
	if err != nil {
		return err
	}
	w := identityWire{Current: priv}
	for _, r := range retired {
		w.Retired = append(w.Retired, retiredWire{Key: r.key, Until: r.until.UTC()})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("auth: save identity: %w", err)
	}
	if err := id.store.PutSecret(ctx, identitySecret, b); err != nil {
		return fmt.Errorf("auth: save identity: %w", err)
	}
	return nil
}

// timeNow is the clock seam; tests replace the per-object now fields.
var timeNow = time.Now

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
