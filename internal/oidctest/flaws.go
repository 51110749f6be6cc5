package oidctest

// This file makes the Provider issue ID tokens that a client must refuse,
// one flaw at a time, so that each check of OpenID Connect Core 1.0
// §3.1.3.7 a client makes can be shown to be made. zitadel's op only
// issues correct ID tokens (its aud always names the client, its azp is the
// client), so the flawed one is the op's own, its claims changed and signed
// again with the Provider's current, published key: what a faulty or
// hostile issuer, whose keys the client trusts, would send.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"

	jose "github.com/go-jose/go-jose/v4"
)

// IDTokenFlaws make the Provider's ID tokens break one rule or more of
// OIDC Core §3.1.3.7. The zero value breaks none.
type IDTokenFlaws struct {
	// Audience replaces aud, which should contain the client ID
	// (§3.1.3.7 (3)). Nil: as issued, the client ID.
	Audience []string
	// AuthorizedParty replaces azp, which should be the client ID when
	// present (§3.1.3.7 (5)). Zero: as issued, the client ID.
	AuthorizedParty string
	// NoAuthorizedParty leaves azp out, which a token of several
	// audiences should have (§3.1.3.7 (4)).
	NoAuthorizedParty bool
	// Nonce replaces nonce, which should be the authentication request's
	// (§3.1.3.7 (11)). Zero: as issued, the request's.
	Nonce string
	// NoNonce leaves nonce out, which a token answering a request that
	// sent one must have (§3.1.3.7 (11)).
	NoNonce bool
}

// none reports whether f breaks nothing.
func (f IDTokenFlaws) none() bool {
	return f.Audience == nil && f.AuthorizedParty == "" && !f.NoAuthorizedParty && f.Nonce == "" && !f.NoNonce
}

// apply breaks the rules of f in the claims c.
func (f IDTokenFlaws) apply(c map[string]any) {
	if f.Audience != nil {
		c["aud"] = f.Audience
	}
	if f.AuthorizedParty != "" {
		c["azp"] = f.AuthorizedParty
	}
	if f.NoAuthorizedParty {
		delete(c, "azp")
	}
	if f.Nonce != "" {
		c["nonce"] = f.Nonce
	}
	if f.NoNonce {
		delete(c, "nonce")
	}
}

// FlawIDTokens makes the ID tokens issued from now on break the rules of
// f; the zero IDTokenFlaws makes them correct again.
func (p *Provider) FlawIDTokens(f IDTokenFlaws) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idFlaws = f
}

// flawIDTokens rewrites the ID token of the token endpoint's successful
// answers by the flaws set with FlawIDTokens.
func (p *Provider) flawIDTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		f := p.idFlaws
		p.mu.Unlock()
		if f.none() {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			if b, err := p.flawAnswer(body, f); err == nil {
				body = b
			} else {
				http.Error(w, "oidctest: cannot flaw the ID token: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// flawAnswer is the token response body with its id_token flawed by f.
func (p *Provider) flawAnswer(body []byte, f IDTokenFlaws) ([]byte, error) {
	var answer map[string]any
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, err
	}
	raw, _ := answer["id_token"].(string)
	tok, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	d := json.NewDecoder(bytes.NewReader(tok.UnsafePayloadWithoutVerification())) // the op's own token, just signed
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		return nil, err
	}
	f.apply(claims)
	if answer["id_token"], err = p.sign(claims); err != nil {
		return nil, err
	}
	return json.Marshal(answer)
}

// sign signs claims with the Provider's current key, as the op does.
func (p *Provider) sign(claims map[string]any) (string, error) {
	p.store.mu.Lock()
	k := p.store.keys[len(p.store.keys)-1]
	p.store.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", k.id))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
