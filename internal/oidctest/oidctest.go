// Package oidctest runs a real OpenID Provider in-process, for tests of
// poppy-mcp as an OAuth protected resource and as an OpenID Connect client:
// the op package of github.com/zitadel/oidc/v3, with in-memory storage,
// over TLS with a certificate authority of its own, under a name of its own
// (like net/http/httptest). Its access tokens are JWTs (RFC 9068) whose
// audience is the client's configured resource, exactly as a production
// server would issue them; nothing here mints a token by hand, except the
// flawed ID tokens FlawIDTokens asks for (flaws.go).
//
// People sign in at the Provider's login page by being signed in there
// already: a browser that SignIn marked as a person's is that person.
package oidctest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
)

// Options configure a Provider. The zero value is usable.
type Options struct {
	// Host is the Provider's name; its issuer is https://Host. Zero: "idp.test".
	Host string
	// TokenLifetime is how long access tokens last. Zero: 5 minutes.
	TokenLifetime time.Duration
}

// Client is a client registered with the Provider.
type Client struct {
	// ID is the client_id.
	ID string
	// Secret is the client secret. Zero: a public client (PKCE alone).
	Secret string
	// RedirectURIs are the registered redirect URIs.
	RedirectURIs []string
	// Audience is the aud of the access tokens issued to this client: the
	// resource it asks for. Zero: the client ID, zitadel's default.
	Audience []string
}

// userCookie marks a browser as signed in at the Provider as a person.
const userCookie = "oidctest_user"

// Provider is a running OpenID Provider. It is safe for concurrent use.
type Provider struct {
	host, issuer string
	srv          *httptest.Server
	caPEM        []byte
	pool         *x509.CertPool
	op           *op.Provider
	store        *storage

	mu      sync.Mutex
	served  map[string]int // requests by path; guarded by mu
	idFlaws IDTokenFlaws   // what FlawIDTokens set; guarded by mu
}

// New starts a Provider on 127.0.0.1; it stops when the test ends.
func New(t testing.TB, opts *Options) *Provider {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Host == "" {
		o.Host = "idp.test"
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = 5 * time.Minute
	}
	p := &Provider{host: o.Host, issuer: "https://" + o.Host, store: newStorage(o.TokenLifetime), served: map[string]int{}}
	leaf := p.makeCA(t)
	var key [32]byte
	rand.Read(key[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: key, CodeMethodS256: true, AuthMethodPost: true},
		p.store, op.StaticIssuer(p.issuer))
	if err != nil {
		t.Fatal(err)
	}
	p.op = provider
	mux := http.NewServeMux()
	mux.Handle("/login", op.NewIssuerInterceptor(provider.IssuerFromRequest).HandlerFunc(p.login))
	mux.Handle("/", provider)
	mux.Handle("POST /oauth/token", p.flawIDTokens(provider))
	p.srv = httptest.NewUnstartedServer(p.count(mux))
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

// makeCA makes the Provider's CA and a leaf for its host.
func (p *Provider) makeCA(t testing.TB) tls.Certificate {
	t.Helper()
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oidctest CA for " + p.host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: p.host}, DNSNames: []string{p.host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey}
}

// count counts the requests served, by path.
func (p *Provider) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.served[r.URL.Path]++
		p.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// Close stops the Provider: from then on it answers nothing, as an
// authorization server that went down. New closes it when the test ends
// anyway.
func (p *Provider) Close() { p.srv.Close() }

// Issuer is the issuer identifier, https://Host.
func (p *Provider) Issuer() string { return p.issuer }

// Host is the Provider's name.
func (p *Provider) Host() string { return p.host }

// Addr is the "127.0.0.1:port" the Provider listens on; Host:443 must be
// mapped to it (netguard's Resolve, poppy-mcp's --resolve).
func (p *Provider) Addr() string { return p.srv.Listener.Addr().String() }

// CAPEM is the Provider's CA certificate, PEM-encoded (for SSL_CERT_FILE).
func (p *Provider) CAPEM() []byte { return p.caPEM }

// CertPool trusts the Provider's CA.
func (p *Provider) CertPool() *x509.CertPool { return p.pool.Clone() }

// Served is how many requests the Provider has served at path.
func (p *Provider) Served(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[path]
}

// AddClient registers a client.
func (p *Provider) AddClient(c Client) { p.store.addClient(c) }

// RotateKey makes a new signing key for the tokens issued from now on; the
// old keys stay published.
func (p *Provider) RotateKey() { p.store.rotate() }

// Transport reaches the Provider under its name and trusts its CA.
func (p *Provider) Transport() *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.CertPool()},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == p.host+":443" {
				addr = p.Addr()
			}
			return d.DialContext(ctx, network, addr)
		},
	}
}

// SignIn makes jar a browser signed in at the Provider as user: the
// Provider's login page lets it through as that person.
func (p *Provider) SignIn(jar http.CookieJar, user string) {
	jar.SetCookies(&url.URL{Scheme: "https", Host: p.host, Path: "/"},
		[]*http.Cookie{{Name: userCookie, Value: user, Path: "/", Secure: true, HttpOnly: true}})
}

// login is the Provider's login page: a browser signed in as a person
// (SignIn) completes the authorization request as that person.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(userCookie)
	if err != nil || strings.TrimSpace(c.Value) == "" {
		http.Error(w, "oidctest: not signed in at the identity provider", http.StatusUnauthorized)
		return
	}
	id := r.URL.Query().Get("authRequestID")
	if err := p.store.signIn(id, c.Value); err != nil {
		http.Error(w, "oidctest: unknown authorization request", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(r.Context(), id), http.StatusFound)
}

// Access tokens are had the way an MCP client has them: the
// authorization code flow with PKCE (RFC 7636), through a browser signed in
// at the Provider, with golang.org/x/oauth2 as the client.

// errArrived stops a browser at the client's redirect URI.
var errArrived = errors.New("arrived at the redirect URI")

// AccessToken runs the authorization code flow for the registered client
// clientID as user, asking for scopes (and openid), and returns the access
// token the Provider issued.
func (p *Provider) AccessToken(t testing.TB, clientID, user string, scopes ...string) string {
	t.Helper()
	tok, err := p.Exchange(clientID, user, scopes...)
	if err != nil {
		t.Fatalf("oidctest: the code flow for %s as %s: %v", clientID, user, err)
	}
	return tok.AccessToken
}

// Exchange runs the authorization code flow for clientID as user and
// returns the token response.
//
// Its connections are closed at its end: a benchmark signs thousands of
// people in, and kept-alive connections would hold two descriptors each
// (both ends are in the test's process).
func (p *Provider) Exchange(clientID, user string, scopes ...string) (*oauth2.Token, error) {
	p.store.mu.Lock()
	c, ok := p.store.clients[clientID]
	p.store.mu.Unlock()
	if !ok || len(c.Client.RedirectURIs) == 0 {
		return nil, errors.New("no such client, or it has no redirect URI")
	}
	cfg := p.Config(c.Client)
	cfg.Scopes = append([]string{"openid"}, scopes...)
	verifier := oauth2.GenerateVerifier()
	state := randomString()
	jar, _ := cookiejar.New(nil)
	p.SignIn(jar, user)
	redirect, _ := url.Parse(cfg.RedirectURL)
	tr, exchange := p.Transport(), p.Transport()
	defer tr.CloseIdleConnections()
	defer exchange.CloseIdleConnections()
	browser := &http.Client{Transport: tr, Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if r.URL.Host == redirect.Host && r.URL.Path == redirect.Path {
				return errArrived
			}
			return nil
		}}
	resp, err := browser.Get(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
	var back *url.URL
	if uerr := (*url.Error)(nil); errors.As(err, &uerr) && errors.Is(err, errArrived) {
		back, _ = url.Parse(uerr.URL)
	} else if err == nil {
		resp.Body.Close()
		return nil, errors.New("the authorization request ended at " + resp.Request.URL.String() + ": " + resp.Status)
	} else {
		return nil, err
	}
	if back.Query().Get("state") != state || back.Query().Get("code") == "" {
		return nil, errors.New("the authorization response has no code, or another state: " + back.RawQuery)
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: exchange, Timeout: 10 * time.Second})
	return cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
}

// Config is an oauth2.Config for c at the Provider.
func (p *Provider) Config(c Client) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if c.Secret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: c.RedirectURIs[0],
		Endpoint: oauth2.Endpoint{AuthURL: p.issuer + "/authorize", TokenURL: p.issuer + "/oauth/token", AuthStyle: style}}
}

func randomString() string {
	b := make([]byte, 16)
	rand.Read(b)
	return strings.TrimRight(base64.RawURLEncoding.EncodeToString(b), "=")
}
