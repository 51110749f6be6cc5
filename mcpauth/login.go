package mcpauth

// This file signs a browser in with the authorization server: OpenID
// Connect Core 1.0's authorization code flow, with PKCE (RFC 7636) and a
// nonce, poppy-mcp being a client of the issuer (serve --auth-client-id).
// The pages a person opens (mediated sign-in, the Direct Sign-In start)
// cannot see the MCP client's token, so the browser proves who it is this
// way, once, and keeps a cookie for this origin that says so; Login, as
// the pages Gate, then admits it only to its person's pages.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/poppy-mcp/poppy-mcp/pages"
)

// CallbackPath is where the authorization server sends the browser back,
// under the public URL: mount Login.CallbackHandler there, and register
// PublicURL + CallbackPath as the client's redirect URI.
const CallbackPath = "/auth/callback"

// SessionCookie is the cookie that says who the browser's person is.
const SessionCookie = "__Host-poppy-person"

// loginCookiePrefix starts the name of the cookie that ties one sign-in to
// the browser that started it; the start of its state follows.
const loginCookiePrefix = "__Host-poppy-login-"

// loginTTL is how long a browser has to finish signing in.
const loginTTL = 10 * time.Minute

// LoginOptions configure a Login. ClientID is required.
type LoginOptions struct {
	// ClientID is poppy-mcp's client ID at the issuer. Required.
	ClientID string
	// ClientSecret is its secret (client_secret_basic). Zero: a public
	// client, PKCE alone.
	ClientSecret string
	// Scopes are asked for beside openid. Zero: none.
	Scopes []string
	// SessionTTL is how long a browser stays signed in. Zero: 12 hours.
	SessionTTL time.Duration
	// HTTPClient reaches the token endpoint: give it the network guard.
	// Zero: http.DefaultClient.
	HTTPClient *http.Client
}

// Login signs browsers in with the Resource's issuer and is the pages Gate
// of a deployment serving several people. It is safe for concurrent use.
type Login struct {
	r        *Resource
	redirect string
	opts     LoginOptions
	cookies  sealer
}

// loginState is what the login cookie keeps between the redirect to the
// issuer and the browser's return.
type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r"`
	Expires  int64  `json:"e"`
}

// personState is what the session cookie says.
type personState struct {
	Issuer  string `json:"i"`
	Subject string `json:"s"`
	Expires int64  `json:"e"`
}

// NewLogin returns the browser sign-in of a deployment reachable at
// publicURL (https), whose redirect URI is publicURL + CallbackPath.
func (r *Resource) NewLogin(publicURL string, opts *LoginOptions) (*Login, error) {
	if opts == nil || opts.ClientID == "" {
		return nil, errors.New("mcpauth: a Login needs the client ID poppy-mcp has at " + r.issuer)
	}
	if u, err := url.Parse(publicURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("mcpauth: the public URL %q must be an https URL", publicURL)
	}
	l := &Login{r: r, redirect: strings.TrimSuffix(publicURL, "/") + CallbackPath, opts: *opts}
	if l.opts.SessionTTL <= 0 {
		l.opts.SessionTTL = 12 * time.Hour
	}
	if l.opts.HTTPClient == nil {
		l.opts.HTTPClient = http.DefaultClient
	}
	var err error
	l.cookies, err = newSealer(r.secret, "browser cookies")
	return l, err
}

// RedirectURI is the redirect URI to register for the client at the issuer.
func (l *Login) RedirectURI() string { return l.redirect }

// Person returns the person the browser of req is signed in as.
func (l *Login) Person(req *http.Request) (User, bool) {
	c, err := req.Cookie(SessionCookie)
	var p personState
	if err != nil || !l.cookies.open(SessionCookie, c.Value, &p) {
		return User{}, false
	}
	if p.Issuer != l.r.issuer || p.Subject == "" || l.r.now().Unix() >= p.Expires {
		return User{}, false
	}
	return User{Issuer: p.Issuer, Subject: p.Subject}, true
}

// config is the OAuth client at the issuer.
func (l *Login) config(m *issuerMetadata) *oauth2.Config {
	style := oauth2.AuthStyleInHeader // OIDC Core §9: client_secret_basic is the default
	if l.opts.ClientSecret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: l.opts.ClientID, ClientSecret: l.opts.ClientSecret, RedirectURL: l.redirect,
		Scopes:   append([]string{"openid"}, l.opts.Scopes...),
		Endpoint: oauth2.Endpoint{AuthURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint, AuthStyle: style}}
}

// start sends the browser to the issuer to sign in, and back to the page
// it asked for (back, a path on this origin) afterwards.
func (l *Login) start(w http.ResponseWriter, req *http.Request, back string) {
	m, err := l.r.keys.metadata(req.Context())
	if err != nil || m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
		l.r.log.Error("mcpauth: cannot sign a browser in", "issuer", l.r.issuer, "err", err)
		message(w, http.StatusServiceUnavailable, "Sign-in unavailable", "The sign-in service cannot be reached now. Try again in a minute.")
		return
	}
	st := loginState{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Return: back,
		Expires: l.r.now().Add(loginTTL).Unix()}
	setCookie(w, loginCookie(st.State), l.cookies.seal(loginCookie(st.State), st), loginTTL)
	// OIDC Core §3.1.2.1: state and nonce; RFC 7636 §4.3: code_challenge, S256.
	u := l.config(m).AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oauth2.SetAuthURLParam("nonce", st.Nonce))
	http.Redirect(w, req, u, http.StatusSeeOther)
}

// loginCookie is the name of the login cookie of the sign-in with state.
func loginCookie(state string) string {
	if len(state) > 16 {
		state = state[:16]
	}
	return loginCookiePrefix + state
}

// CallbackHandler takes the browser back from the issuer (OIDC Core
// §3.1.2.5), in the browser that started the sign-in: it checks state and
// iss, exchanges the code with the PKCE verifier, checks the ID token, and
// sets the session cookie.
func (l *Login) CallbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		st, ok := l.pending(w, req)
		if !ok {
			message(w, http.StatusBadRequest, "Sign-in not started here",
				"This sign-in was not started in this browser, or took too long. Open the link from your assistant again.")
			return
		}
		u, err := l.finish(req, st)
		if err != nil {
			l.r.log.Info("mcpauth: a browser sign-in failed", "reason", err)
			message(w, http.StatusForbidden, "Sign-in failed", "You are not signed in: "+errorText(err)+" Open the link from your assistant again.")
			return
		}
		setCookie(w, SessionCookie, l.cookies.seal(SessionCookie, personState{Issuer: u.Issuer, Subject: u.Subject,
			Expires: l.r.now().Add(l.opts.SessionTTL).Unix()}), l.opts.SessionTTL)
		l.r.log.Info("mcpauth: a browser signed in", "user", l.r.logIDs.Of(u))
		http.Redirect(w, req, st.Return, http.StatusSeeOther)
	})
}

// pending returns the sign-in the browser started with the state of req,
// and clears its cookie: a state is used once.
func (l *Login) pending(w http.ResponseWriter, req *http.Request) (loginState, bool) {
	state := req.URL.Query().Get("state")
	var st loginState
	c, err := req.Cookie(loginCookie(state))
	if state == "" || err != nil || !l.cookies.open(c.Name, c.Value, &st) {
		return st, false
	}
	clearCookie(w, c.Name)
	// OIDC Core §3.1.2.7 and RFC 6749 §10.12: the state ties the response to this browser's request.
	ok := subtle.ConstantTimeCompare([]byte(st.State), []byte(state)) == 1 && l.r.now().Unix() < st.Expires
	return st, ok
}

// finish checks the authorization response and exchanges its code.
func (l *Login) finish(req *http.Request, st loginState) (User, error) {
	q := req.URL.Query()
	m, err := l.r.keys.metadata(req.Context())
	if err != nil {
		return User{}, err
	}
	// RFC 9207 §2.4: iss, when the server sends it (or says it does), must be the issuer.
	if iss := q.Get("iss"); (iss != "" || m.IssParameterSupported) && iss != l.r.issuer {
		return User{}, errors.New("the response came from another issuer")
	}
	if e := q.Get("error"); e != "" {
		return User{}, fmt.Errorf("the sign-in service answered %s", printable(e))
	}
	ctx := context.WithValue(req.Context(), oauth2.HTTPClient, l.opts.HTTPClient)
	tok, err := l.config(m).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) { // its body is the server's; the code stays out of the log
			return User{}, fmt.Errorf("the token endpoint answered %s", printable(re.ErrorCode))
		}
		return User{}, errors.New("the token endpoint could not be reached")
	}
	raw, _ := tok.Extra("id_token").(string)
	return l.verifyIDToken(req.Context(), raw, st.Nonce)
}

// idClaims are the claims of an ID token that are checked.
type idClaims struct {
	jwt.Claims
	Nonce string `json:"nonce"`
	AZP   string `json:"azp"`
}

// verifyIDToken checks an ID token as OIDC Core §3.1.3.7 asks.
func (l *Login) verifyIDToken(ctx context.Context, raw, nonce string) (User, error) {
	h, err := readHeader(raw)
	if err != nil {
		return User{}, errors.New("no usable ID token")
	}
	var c idClaims
	if err := l.r.signed(ctx, raw, h, &c); err != nil {
		return User{}, err
	}
	now := l.r.now()
	switch {
	case c.Issuer != l.r.issuer || c.Subject == "": // §3.1.3.7 (2)
		return User{}, errors.New("the ID token is not the issuer's")
	case !slices.Contains(c.Audience, l.opts.ClientID): // (3)
		return User{}, errors.New("the ID token is for another client")
	case (len(c.Audience) > 1 || c.AZP != "") && c.AZP != l.opts.ClientID: // (4), (5)
		return User{}, errors.New("the ID token was issued to another party")
	case c.Expiry == nil || now.After(c.Expiry.Time().Add(l.r.leeway)): // (9)
		return User{}, errors.New("the ID token has expired")
	case subtle.ConstantTimeCompare([]byte(c.Nonce), []byte(nonce)) != 1: // (11)
		return User{}, errors.New("the ID token is not for this sign-in")
	}
	return User{Issuer: c.Issuer, Subject: c.Subject}, nil
}

// errorText is err's reason for a person, without the package prefix.
func errorText(err error) string {
	s := strings.TrimPrefix(err.Error(), "mcpauth: ")
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// randomString is 256 random bits, base64url.
func randomString() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// What Login keeps in a browser's cookies is sealed: small JSON
// values, encrypted and authenticated with AES-256-GCM under a key derived
// from the Resource's secret, the cookie's name bound in as additional
// data so that a value cannot be moved to another cookie. Replicas that
// share the secret read each other's cookies.

// maxCookieValue bounds a cookie value opened.
const maxCookieValue = 4 << 10

// sealer seals and opens cookie values. It is safe for concurrent use.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the key for purpose from secret (RFC 5869 HKDF).
func newSealer(secret []byte, purpose string) (sealer, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, "poppy-mcp mcpauth "+purpose, 32)
	if err != nil {
		return sealer{}, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealer{}, err
	}
	aead, err := cipher.NewGCM(block)
	return sealer{aead}, err
}

// seal encrypts v for the cookie name.
func (s sealer) seal(name string, v any) string {
	plain, _ := json.Marshal(v)
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name)))
}

// open decrypts the cookie name's value into v, reporting whether it was
// sealed by this key for this name.
func (s sealer) open(name, value string, v any) bool {
	if len(value) > maxCookieValue {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < s.aead.NonceSize() {
		return false
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(name))
	return err == nil && json.Unmarshal(plain, v) == nil
}

// setCookie sets a cookie only this origin gets: the __Host- prefix makes
// browsers keep it only when it is Secure, has Path=/ and no Domain.
// SameSite=Lax, not Strict: the browser arrives from another site (the
// assistant's link, the authorization server's redirect) by a top-level
// navigation, which Strict would send without it.
func setCookie(w http.ResponseWriter, name, value string, life time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", Secure: true, HttpOnly: true,
		MaxAge: int(life / time.Second), SameSite: http.SameSiteLaxMode})
}

// clearCookie tells the browser to drop the cookie name.
func clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1, SameSite: http.SameSiteLaxMode})
}

// Login is the pages Gate of a deployment serving several
// people: a page opened for one person (its owner, the local user who asked
// for it) opens only in a browser signed in as that person. A link passed
// on, by a prompt-injected model or otherwise, opens nothing for anyone
// else, not even another person of the same deployment.

var _ pages.Gate = (*Login)(nil)

// Admit admits r when its browser is signed in as the person the page was
// opened for. A browser signed in as nobody is sent to sign in (a GET) and
// comes back to the page; one signed in as someone else is refused, as is
// every browser for a page opened for nobody.
func (l *Login) Admit(w http.ResponseWriter, r *http.Request, owner string) bool {
	if owner == "" {
		message(w, http.StatusForbidden, "Not available", "This page was not opened for a signed-in person.")
		return false
	}
	u, ok := l.Person(r)
	if ok && subtle.ConstantTimeCompare([]byte(u.Key()), []byte(owner)) == 1 {
		return true
	}
	if ok {
		l.r.log.Info("mcpauth: a page was refused to another person", "user", l.r.logIDs.Of(u), "owner", l.r.logIDs.OfKey(owner))
		message(w, http.StatusForbidden, "Not your page",
			"This link was opened for someone else. If you were sent it, do not use it: ask your own assistant for a link of your own.")
		return false
	}
	back := r.URL.EscapedPath()
	if r.Method != http.MethodGet || !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") {
		message(w, http.StatusForbidden, "Sign in first", "Open the link from your assistant again to sign in.")
		return false
	}
	l.start(w, r, back)
	return false
}

// message writes a small page with the pages' own headers.
func message(w http.ResponseWriter, status int, title, text string) {
	pages.Message(w, status, title, text)
}
