package main

// This file decides which identity `serve` loads (Poppy 0.1 §4.1): the one
// `poppy-mcp init` made, with the client metadata init was told (client_id,
// client_name, redirect_uris, jwks_uri, extensions), kept in the store so
// that serve publishes and uses the same agent.json without being told
// again. --client-id still wins, with a warning when it differs.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// identityChoice is the identity serve loads.
type identityChoice struct {
	clientID string // "" when there is none
	opts     *auth.IdentityOptions
	// unstored is said once the key has loaded: the identity has a key
	// but init stored no metadata for it.
	unstored string
}

// chooseIdentity picks the client_id and metadata serve loads: what init
// stored, unless --client-id (flagID) names another.
func chooseIdentity(ctx context.Context, st *store.Store, flagID string, logger *slog.Logger) (identityChoice, error) {
	stored, err := st.AgentMetadata(ctx)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return identityChoice{}, err
	}
	c := identityChoice{clientID: flagID, opts: &auth.IdentityOptions{Store: st, MustExist: true}}
	switch {
	case flagID == "" && !found:
		logger.Warn("no agent identity: only discovery works. Run `poppy-mcp init --client-id URL` and publish the two files it writes")
		return identityChoice{}, nil
	case flagID == "" || flagID == stored.ClientID:
		c.clientID = stored.ClientID
		c.opts.ClientName, c.opts.LogoURI, c.opts.JWKSURI = stored.ClientName, stored.LogoURI, stored.JWKSURI
		c.opts.RedirectURIs, c.opts.Extensions = stored.RedirectURIs, stored.Extensions
	case found:
		logger.Warn(fmt.Sprintf("--client-id %s is not the client_id `poppy-mcp init` stored (%s): serving %s with default metadata "+
			"(no redirect_uris); run `poppy-mcp init --client-id %s` to make it the stored identity", flagID, stored.ClientID, flagID, flagID))
	default:
		c.unstored = fmt.Sprintf("the state directory has no metadata stored for %s (its init ran before poppy-mcp kept it): "+
			"agent.json is served with default metadata (client_name poppy-mcp, no redirect_uris); "+
			"run `poppy-mcp init --client-id %s [--redirect-uri URL]...` once to store what it publishes", flagID, flagID)
	}
	return c, nil
}

// storedMetadata is what the store keeps of id's agent.json.
func storedMetadata(id *auth.Identity) store.AgentMetadata {
	md := id.Metadata()
	ext := map[string]string{}
	for name, v := range md.Extensions {
		ext[name] = v.Version
	}
	return store.AgentMetadata{ClientID: md.ClientID, ClientName: md.ClientName, LogoURI: md.LogoURI,
		JWKSURI: md.JWKSURI, RedirectURIs: md.RedirectURIs, Extensions: ext}
}
