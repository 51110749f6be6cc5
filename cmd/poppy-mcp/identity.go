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
	"os"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// identityChoice is the identity serve loads.
type identityChoice struct {
	clientID string // "" when there is none
	opts     *auth.IdentityOptions
	// from says where clientID came from: "--client-id" or "init".
	from string
	// missing says, when clientID is "", what is missing and what to run,
	// for the log and for the tools that need a Session.
	missing string
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
	c := identityChoice{clientID: flagID, from: "--client-id", opts: &auth.IdentityOptions{Store: st, MustExist: true}}
	switch {
	case flagID == "" && !found:
		return noStoredIdentity(ctx, st)
	case flagID == "" || flagID == stored.ClientID:
		c.from = "init"
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

// noStoredIdentity says what is missing when init stored no client_id and
// none was given: the whole identity, or, when an init of an earlier
// poppy-mcp made the key without storing its metadata, only the client_id.
func noStoredIdentity(ctx context.Context, st *store.Store) (identityChoice, error) {
	hasKey, err := auth.HasSigningKey(ctx, st)
	if err != nil {
		return identityChoice{}, err
	}
	if hasKey {
		return identityChoice{missing: fmt.Sprintf("the state in %s has the signing key `poppy-mcp init` made, but no client_id stored with it "+
			"(that init was an earlier poppy-mcp's): run `poppy-mcp init --client-id URL` once more with the URL its agent.json is published at "+
			"(the key stays the same), or start poppy-mcp with --client-id URL", st.Where())}, nil
	}
	return identityChoice{missing: fmt.Sprintf("the state in %s has no identity: run `poppy-mcp init --client-id https://YOUR.DOMAIN/agent.json` "+
		"%s, publish the agent.json and jwks.json it writes at those URLs, and start poppy-mcp again "+
		"(no --client-id needed then)", st.Where(), sameState(st.Where()))}, nil
}

// noSigningKey says what is missing when choice names a client_id but the
// state has no signing key.
func noSigningKey(st *store.Store, choice identityChoice) string {
	named := "the flag --client-id names " + choice.clientID
	switch {
	case choice.from == "init":
		named = "`poppy-mcp init` stored the client_id " + choice.clientID
	case os.Getenv("POPPY_CLIENT_ID") == choice.clientID:
		named = "the environment variable POPPY_CLIENT_ID names " + choice.clientID
	}
	return fmt.Sprintf("%s, but the state in %s has no signing key for it: run `poppy-mcp init --client-id %s` %s, "+
		"publish the agent.json and jwks.json it writes, and start poppy-mcp again", named, st.Where(), choice.clientID, sameState(st.Where()))
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
