package oidctest

// This file gets access tokens the way an MCP client does: the
// authorization code flow with PKCE (RFC 7636), through a browser signed in
// at the Provider, with golang.org/x/oauth2 as the client.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

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
	browser := &http.Client{Transport: p.Transport(), Jar: jar, Timeout: 10 * time.Second,
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
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: p.Transport(), Timeout: 10 * time.Second})
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
