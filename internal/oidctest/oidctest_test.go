package oidctest

import (
	"encoding/json"
	"net/http"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestAccessTokenIsAJWTForTheResource: the Provider's access tokens are
// RS256 JWTs signed with a key it publishes, for the client's audience,
// with the user as sub and the scopes asked for; after RotateKey, new
// tokens are signed with a new key and both are published.
func TestAccessTokenIsAJWTForTheResource(t *testing.T) {
	p := New(t, nil)
	p.AddClient(Client{ID: "mcp-client", RedirectURIs: []string{"https://client.test/cb"}, Audience: []string{"https://agent.test/mcp"}})
	raw := p.AccessToken(t, "mcp-client", "alice", "mcp:tools")
	keys := p.keySet(t)
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		jwt.Claims
		Scope string `json:"scope"`
	}
	if err := tok.Claims(keys.Key(tok.Headers[0].KeyID)[0].Key, &c); err != nil {
		t.Fatalf("the token does not verify with the published key: %v", err)
	}
	if c.Issuer != p.Issuer() || c.Subject != "alice" || !c.Audience.Contains("https://agent.test/mcp") || c.Scope != "openid mcp:tools" || c.Expiry == nil {
		t.Errorf("claims = %+v", c)
	}
	p.RotateKey()
	raw2 := p.AccessToken(t, "mcp-client", "alice")
	tok2, _ := jwt.ParseSigned(raw2, []jose.SignatureAlgorithm{jose.RS256})
	if tok2.Headers[0].KeyID == tok.Headers[0].KeyID || len(p.keySet(t).Keys) != 2 {
		t.Errorf("after RotateKey: kid %s, %d keys published", tok2.Headers[0].KeyID, len(p.keySet(t).Keys))
	}
	if p.Served("/keys") != 2 {
		t.Errorf("Served(/keys) = %d, want 2", p.Served("/keys"))
	}
}

// TestLoginNeedsASignedInBrowser: a browser not signed in at the Provider
// gets no code.
func TestLoginNeedsASignedInBrowser(t *testing.T) {
	p := New(t, nil)
	p.AddClient(Client{ID: "c", RedirectURIs: []string{"https://client.test/cb"}})
	if _, err := p.Exchange("c", ""); err == nil {
		t.Error("a browser signed in as nobody got a token")
	}
}

func (p *Provider) keySet(t *testing.T) jose.JSONWebKeySet {
	t.Helper()
	resp, err := (&http.Client{Transport: p.Transport()}).Get(p.Issuer() + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestFlawIDTokens: a flawed ID token has the claims asked for, keeps the
// others, and still verifies with a published key; the zero flaws make
// correct ID tokens again.
func TestFlawIDTokens(t *testing.T) {
	p := New(t, nil)
	p.AddClient(Client{ID: "c", RedirectURIs: []string{"https://client.test/cb"}})
	p.FlawIDTokens(IDTokenFlaws{Audience: []string{"c", "d"}, NoAuthorizedParty: true, Nonce: "n2"})
	c := p.idClaims(t)
	if len(c.Audience) != 2 || c.AZP != "" || c.Nonce != "n2" || c.Subject != "alice" || c.Issuer != p.Issuer() {
		t.Errorf("flawed claims = %+v", c)
	}
	p.FlawIDTokens(IDTokenFlaws{AuthorizedParty: "d"})
	if c := p.idClaims(t); c.AZP != "d" || !c.Audience.Contains("c") {
		t.Errorf("flawed azp: claims = %+v", c)
	}
	p.FlawIDTokens(IDTokenFlaws{})
	if c := p.idClaims(t); c.AZP != "c" || len(c.Audience) != 1 || c.Audience[0] != "c" || c.Nonce != "" {
		t.Errorf("unflawed claims = %+v", c)
	}
}

type idClaims struct {
	jwt.Claims
	AZP   string `json:"azp"`
	Nonce string `json:"nonce"`
}

// idClaims are the verified claims of an ID token issued to c for alice.
func (p *Provider) idClaims(t *testing.T) idClaims {
	t.Helper()
	tok, err := p.Exchange("c", "alice")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	parsed, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var c idClaims
	keys := p.keySet(t)
	if err := parsed.Claims(keys.Key(parsed.Headers[0].KeyID)[0].Key, &c); err != nil {
		t.Fatalf("the ID token does not verify with the published key: %v", err)
	}
	return c
}
