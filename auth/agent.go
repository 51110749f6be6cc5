// This file implements the Agent, which holds what every Session of a
// Personal Agent shares: the identity, the store, the HTTP transport, DPoP
// nonces per origin (RFC 9449 §8) and rate limits per endpoint (Poppy 0.1 §4.3).

package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
)

// Company is what auth needs to know about a Company. The tools layer fills
// it from discovery (poppy.json and the RFC 8414 metadata).
type Company struct {
	// Issuer is auth.issuer, which identifies the Company (Poppy 0.1 §3.2). Required.
	Issuer string
	// Domain is organization.domain.
	Domain string
	// TokenEndpoint is token_endpoint. Required.
	TokenEndpoint string
	// RevocationEndpoint is revocation_endpoint.
	RevocationEndpoint string
	// AuthorizationEndpoint is authorization_endpoint (Direct Sign-In).
	AuthorizationEndpoint string
	// DeviceAuthorizationEndpoint is device_authorization_endpoint.
	DeviceAuthorizationEndpoint string
	// MediatedEndpoint is auth.mediated.endpoint.
	MediatedEndpoint string
	// BrowserSessionEndpoint is web.browser_session_endpoint.
	BrowserSessionEndpoint string
	// MCPServers are the url of every apis entry of type mcp: the only
	// resources Bearer tokens are requested for (Poppy 0.1 §4.3).
	MCPServers []string
}

func (c Company) check() error {
	if _, err := httpsURL("issuer", c.Issuer); err != nil {
		return err
	}
	_, err := httpsURL("token_endpoint", c.TokenEndpoint)
	return err
}

// Options configures New. A nil *Options means all defaults.
type Options struct {
	// HTTPClient sends every request. Its Transport and Timeout are used;
	// auth sets its own redirect policies. Zero: http.DefaultClient.
	HTTPClient *http.Client
	// Store keeps the DPoP keys per User per Company, so a restarted agent
	// can keep using its Sessions. Zero: keys live in memory only.
	Store SecretStore
	// Accounts keeps the Account Tokens the agent holds, one per User per
	// Company (see Agent.Open), shared with every process that opens it.
	// Zero: Store, when it is an AccountStore too (*store.Store is);
	// otherwise Account Tokens are held in memory only, for the Agent's life.
	Accounts AccountStore
	// MaxBody bounds token and error bodies auth reads, and request bodies
	// it buffers to replay. Zero: 1 MiB.
	MaxBody int64
	// MaxWait is the longest a request without a deadline waits for a
	// rate limit; past it, it fails with *RetryAfterError. Zero: 60 s.
	MaxWait time.Duration
	// Holds keeps the Retry-After of every 429, per endpoint. Give the
	// same Holds to discovery, so a hold set by a document fetch or by a
	// Session request is honoured by both. Zero: the Agent's own.
	Holds *retryafter.Holds
	// RenewTimeout bounds one Session renewal, which runs on behalf of every
	// request waiting for it. Zero: 30 s.
	RenewTimeout time.Duration
}

// Agent is a Personal Agent's auth side: it starts Sessions and hands out
// their HTTP clients. It is safe for concurrent use.
type Agent struct {
	id           *Identity
	base         *http.Client
	tokenHTTP    *http.Client // no redirects
	store        SecretStore
	maxBody      int64
	renewTimeout time.Duration
	now          func() time.Time
	nonces       *nonces // shared by every view (WithStore)
	limits       *limits

	// keysMu guards keys, and is held while a key is loaded or created.
	keysMu sync.Mutex
	keys   map[string]*ProofKey

	accounts AccountStore // nil: Account Tokens in memory only
	// heldMu guards held.
	heldMu sync.Mutex
	held   map[string]*holding // issuer+" "+userID -> the Account Token held
}

// New returns an Agent for the identity.
func New(id *Identity, opts *Options) *Agent {
	if opts == nil {
		opts = &Options{}
	}
	base := opts.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	a := &Agent{
		id: id, base: base, store: opts.Store,
		maxBody: opts.MaxBody, renewTimeout: opts.RenewTimeout,
		now: timeNow, nonces: &nonces{}, keys: map[string]*ProofKey{}, accounts: opts.Accounts, held: map[string]*holding{},
	}
	if as, ok := opts.Store.(AccountStore); ok && a.accounts == nil {
		a.accounts = as
	}
	if a.maxBody <= 0 {
		a.maxBody = 1 << 20
	}
	if a.renewTimeout <= 0 {
		a.renewTimeout = 30 * time.Second
	}
	a.limits = &limits{now: a.nowFunc, sleep: sleepCtx, maxWait: opts.MaxWait, holds: opts.Holds}
	if a.limits.holds == nil {
		a.limits.holds = &retryafter.Holds{}
	}
	if a.limits.maxWait <= 0 {
		a.limits.maxWait = 60 * time.Second
	}
	tc := *base
	tc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	a.tokenHTTP = &tc
	return a
}

// WithStore returns a view of the Agent that keeps its DPoP keys and
// Account Tokens in st instead: a hosted Personal Agent gives each person
// their own (store.Store.ForUser), so what one person holds is out of
// every other's reach. The view shares the identity, the HTTP client, the
// DPoP nonces per origin and the 429 holds with a, since those belong to
// the agent and the Companies, not to a person; the keys and Account
// Tokens it has loaded are its own. st nil: in memory only.
func (a *Agent) WithStore(st SecretStore) *Agent {
	v := &Agent{
		id: a.id, base: a.base, tokenHTTP: a.tokenHTTP, store: st, maxBody: a.maxBody, renewTimeout: a.renewTimeout,
		now: a.nowFunc, nonces: a.nonces, limits: a.limits, keys: map[string]*ProofKey{}, held: map[string]*holding{},
	}
	if as, ok := st.(AccountStore); ok {
		v.accounts = as
	}
	return v
}

func (a *Agent) transport() http.RoundTripper {
	if a.base.Transport != nil {
		return a.base.Transport
	}
	return http.DefaultTransport
}

// nowFunc reads a.now at call time, so tests can swap the clock after New.
func (a *Agent) nowFunc() time.Time { return a.now() }

// Identity returns the agent's identity.
func (a *Agent) Identity() *Identity { return a.id }

// proofKey loads or creates the DPoP key of userID at the Company.
// Poppy 0.1 §4.3: "The Personal Agent generates a key pair for each User at each Company".
func (a *Agent) proofKey(ctx context.Context, issuer, userID string) (*ProofKey, error) {
	name := "dpop/" + issuer + "/" + userID // the store's naming convention
	a.keysMu.Lock()
	defer a.keysMu.Unlock()
	if pk, ok := a.keys[name]; ok {
		return pk, nil
	}
	k, err := a.loadOrCreateKey(ctx, name)
	if err != nil {
		return nil, err
	}
	pk := NewProofKey(k)
	pk.now = a.nowFunc
	a.keys[name] = pk
	return pk, nil
}

func (a *Agent) loadOrCreateKey(ctx context.Context, name string) (*Key, error) {
	if a.store == nil {
		return GenerateKey()
	}
	b, err := a.store.Secret(ctx, name)
	if err == nil {
		return ParseKey(b)
	}
	if !isNotFound(err) {
		return nil, fmt.Errorf("auth: load DPoP key: %w", err)
	}
	k, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	priv, err := k.MarshalPrivate()
	if err != nil {
		return nil, err
	}
	if err := a.store.PutSecret(ctx, name, priv); err != nil {
		return nil, fmt.Errorf("auth: store DPoP key: %w", err)
	}
	return k, nil
}

// limits applies the holds of 429 answers (Poppy 0.1 §4.3): it waits
// for them or fails with *RetryAfterError. It is safe for concurrent use.
type limits struct {
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	maxWait time.Duration
	holds   *retryafter.Holds // shared with whatever else talks to Companies
}

// set records a 429's Retry-After for an endpoint; a later time wins.
func (l *limits) set(endpoint string, d time.Duration) {
	l.holds.Hold(endpoint, l.now().Add(d))
}

func (l *limits) remaining(endpoint string) time.Duration {
	return l.holds.Remaining(endpoint, l.now())
}

// wait blocks until the endpoint may be used, or fails at once with
// *RetryAfterError when ctx's deadline (or MaxWait) comes first.
// Poppy 0.1 §4.3: "The Personal Agent MUST wait at least that long before sending the request again."
func (l *limits) wait(ctx context.Context, endpoint string) error {
	for {
		d := l.remaining(endpoint)
		if d <= 0 {
			return nil
		}
		if err := l.fits(ctx, endpoint, d); err != nil {
			return err
		}
		if err := l.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// check fails with *RetryAfterError when the endpoint is limited for longer
// than ctx allows; it never waits.
func (l *limits) check(ctx context.Context, endpoint string) error {
	if d := l.remaining(endpoint); d > 0 {
		return l.fits(ctx, endpoint, d)
	}
	return nil
}

func (l *limits) fits(ctx context.Context, endpoint string, d time.Duration) error {
	dl, ok := ctx.Deadline()
	if ok && l.now().Add(d).After(dl) || !ok && d > l.maxWait {
		return &RetryAfterError{Wait: d, Endpoint: endpoint}
	}
	return nil
}

// retryAfter returns the error for an endpoint still limited after a retry.
func (l *limits) retryAfter(endpoint string) error {
	return &RetryAfterError{Wait: max(l.remaining(endpoint), defaultRetryAfter), Endpoint: endpoint}
}

func sleepCtx(ctx context.Context, d time.Duration) error { return retryafter.Sleep(ctx, d) }

// endpointOf is the rate-limit key of a URL: origin and path.
func endpointOf(u *url.URL) string { return retryafter.Endpoint(u) }

func endpointKey(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("auth: %q is not an absolute URL", raw)
	}
	return endpointOf(u), nil
}
