package app

// This file decides which identity the agent loads (Poppy 0.1 §4.1): the
// one `poppy-mcp init` made, with the client metadata init was told
// (client_id, client_name, redirect_uris, jwks_uri, extensions), kept in
// the store so that serve publishes and uses the same agent.json without
// being told again. --client-id still wins, with a warning when it differs.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// IdentityChoice is the identity the agent loads.
type IdentityChoice struct {
	ClientID string // "" when there is none
	Opts     *auth.IdentityOptions
	// From says where ClientID came from: "--client-id", "init" or "the demo".
	From string
	// Missing says, when ClientID is "", what is missing and what to run,
	// for the log and for the tools that need a Session.
	Missing string
	// Unstored is said once the key has loaded: the identity has a key
	// but init stored no metadata for it.
	Unstored string
}

// ChooseIdentity picks the client_id and metadata the agent loads from st:
// what init stored, unless flagID (--client-id) names another, which
// logger is warned of.
func ChooseIdentity(ctx context.Context, st *store.Store, flagID string, logger *slog.Logger) (IdentityChoice, error) {
	stored, err := st.AgentMetadata(ctx)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return IdentityChoice{}, err
	}
	c := IdentityChoice{ClientID: flagID, From: "--client-id", Opts: &auth.IdentityOptions{Store: st, MustExist: true}}
	switch {
	case flagID == "" && !found:
		return noStoredIdentity(ctx, st)
	case flagID == "" || flagID == stored.ClientID:
		c.From = "init"
		c.ClientID = stored.ClientID
		c.Opts.ClientName, c.Opts.LogoURI, c.Opts.JWKSURI = stored.ClientName, stored.LogoURI, stored.JWKSURI
		c.Opts.RedirectURIs, c.Opts.Extensions = stored.RedirectURIs, stored.Extensions
	case found:
		logger.Warn(fmt.Sprintf("--client-id %s is not the client_id `poppy-mcp init` stored (%s): serving %s with default metadata "+
			"(no redirect_uris); run `poppy-mcp init --client-id %s` to make it the stored identity", flagID, stored.ClientID, flagID, flagID))
	default:
		c.Unstored = fmt.Sprintf("the state directory has no metadata stored for %s (its init ran before poppy-mcp kept it): "+
			"agent.json is served with default metadata (client_name poppy-mcp, no redirect_uris); "+
			"run `poppy-mcp init --client-id %s [--redirect-uri URL]...` once to store what it publishes", flagID, flagID)
	}
	return c, nil
}

// noStoredIdentity says what is missing when init stored no client_id and
// none was given: the whole identity, or, when an init of an earlier
// poppy-mcp made the key without storing its metadata, only the client_id.
func noStoredIdentity(ctx context.Context, st *store.Store) (IdentityChoice, error) {
	hasKey, err := auth.HasSigningKey(ctx, st)
	if err != nil {
		return IdentityChoice{}, err
	}
	if hasKey {
		return IdentityChoice{Missing: fmt.Sprintf("the state in %s has the signing key `poppy-mcp init` made, but no client_id stored with it "+
			"(that init was an earlier poppy-mcp's): run `poppy-mcp init --client-id URL` once more with the URL its agent.json is published at "+
			"(the key stays the same), or start poppy-mcp with --client-id URL", st.Where())}, nil
	}
	return IdentityChoice{Missing: fmt.Sprintf("the state in %s has no identity: run `poppy-mcp init --client-id https://YOUR.DOMAIN/agent.json` "+
		"%s, publish the agent.json and jwks.json it writes at those URLs, and start poppy-mcp again "+
		"(no --client-id needed then)", st.Where(), SameState(st.Where()))}, nil
}

// noSigningKey says what is missing when choice names a client_id but the
// state has no signing key.
func noSigningKey(st *store.Store, choice IdentityChoice) string {
	named := "the flag --client-id names " + choice.ClientID
	switch {
	case choice.From == "init":
		named = "`poppy-mcp init` stored the client_id " + choice.ClientID
	case os.Getenv("POPPY_CLIENT_ID") == choice.ClientID:
		named = "the environment variable POPPY_CLIENT_ID names " + choice.ClientID
	}
	return fmt.Sprintf("%s, but the state in %s has no signing key for it: run `poppy-mcp init --client-id %s` %s, "+
		"publish the agent.json and jwks.json it writes, and start poppy-mcp again", named, st.Where(), choice.ClientID, SameState(st.Where()))
}

// StoredMetadata is what the store keeps of id's agent.json.
func StoredMetadata(id *auth.Identity) store.AgentMetadata {
	md := id.Metadata()
	ext := map[string]string{}
	for name, v := range md.Extensions {
		ext[name] = v.Version
	}
	return store.AgentMetadata{ClientID: md.ClientID, ClientName: md.ClientName, LogoURI: md.LogoURI,
		JWKSURI: md.JWKSURI, RedirectURIs: md.RedirectURIs, Extensions: ext}
}

// NoIdentityError says the state holds no identity.
type NoIdentityError struct{ Where string }

// Error says what to run.
func (e *NoIdentityError) Error() string {
	return "no agent identity in " + e.Where + ": run `poppy-mcp init --client-id URL` (with the same --state-dir or --store)"
}

// LoadIdentity loads the identity serve would use from the open state st:
// the one init stored, or the one clientID (--client-id) names. Without
// one it returns a *NoIdentityError.
func LoadIdentity(ctx context.Context, st *store.Store, clientID string, logger *slog.Logger) (*auth.Identity, error) {
	if _, err := st.AgentMetadata(ctx); clientID == "" && errors.Is(err, store.ErrNotFound) {
		return nil, &NoIdentityError{st.Where()}
	}
	choice, err := ChooseIdentity(ctx, st, clientID, logger)
	if err != nil {
		return nil, err
	}
	if choice.ClientID == "" {
		return nil, &NoIdentityError{st.Where()}
	}
	id, err := auth.NewIdentity(ctx, choice.ClientID, choice.Opts)
	if errors.Is(err, auth.ErrNoIdentity) {
		return nil, &NoIdentityError{st.Where()}
	}
	return id, err
}

// newAgent loads the agent's identity: the demo's own (published by the
// demo Company), or the one `poppy-mcp init` made and stored (--client-id
// naming another wins). Without one, the agent is nil and poppy-mcp still
// discovers and checks Companies.
func (a *App) newAgent(ctx context.Context, base http.RoundTripper, holds *retryafter.Holds) (*auth.Agent, error) {
	choice, err := a.choose(ctx)
	if err != nil {
		return nil, err
	}
	var id *auth.Identity
	if choice.ClientID != "" {
		id, err = auth.NewIdentity(ctx, choice.ClientID, choice.Opts)
	}
	if choice.ClientID == "" || errors.Is(err, auth.ErrNoIdentity) {
		// What is missing is said in the log and by every tool that needs a Session.
		if a.noIdentity = choice.Missing; a.noIdentity == "" {
			a.noIdentity = noSigningKey(a.store, choice)
		}
		a.logger.Warn("no agent identity, only discovery works: " + a.noIdentity)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if choice.Unstored != "" {
		a.logger.Warn(choice.Unstored)
	}
	a.logger.Info("agent identity", "client_id", choice.ClientID, "from", choice.From, "key", id.CurrentKeyID())
	a.identity = id
	if err := a.publishDemo(id); err != nil {
		return nil, err
	}
	// No client timeout: conversations long-poll and stream; each call is bounded by its ctx,
	// and each phase (dial, TLS, response headers) by the base transport.
	return auth.New(id, &auth.Options{HTTPClient: &http.Client{Transport: base}, Store: a.store, Holds: holds}), nil
}

// choose is the demo's identity, or the one ChooseIdentity picks.
func (a *App) choose(ctx context.Context) (IdentityChoice, error) {
	if d := a.opts.Demo; d != nil {
		return IdentityChoice{ClientID: d.ClientID, From: "the demo", Opts: &auth.IdentityOptions{Store: a.store}}, nil
	}
	return ChooseIdentity(ctx, a.store, a.opts.ClientID, a.logger)
}

// publishDemo has the demo Company publish id's documents.
func (a *App) publishDemo(id *auth.Identity) error {
	if a.opts.Demo == nil {
		return nil
	}
	agentJSON, err := id.AgentJSON()
	if err != nil {
		return err
	}
	jwks, err := id.JWKSJSON()
	if err != nil {
		return err
	}
	a.opts.Demo.Publish(agentJSON, jwks)
	return nil
}
