package main

// This file is what status, sign-out and forget share: the flags of a
// command that acts for one person, and the state opened as that person
// (package person), with the agent's identity serve uses.

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/person"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// personFlags are the flags of the commands that act for one person.
type personFlags struct {
	common
	user   string // --user ISSUER:SUB
	asJSON bool
	yes    bool
}

// register adds the flags; yes, when not "", is --yes's usage.
func (p *personFlags) register(fs *flag.FlagSet, yes string) {
	p.common.register(fs)
	fs.StringVar(&p.user, "user", "", "in a state that serves several people (hosted mode): the person, as `ISSUER:SUB` of their access token")
	fs.BoolVar(&p.asJSON, "json", false, "print one JSON object")
	if yes != "" {
		fs.BoolVar(&p.yes, "yes", false, yes)
	}
}

// exitCode is 2 for a person.UsageError, else 1.
func exitCode(err error) int {
	var ue *person.UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// openPerson opens the state as the person --user names, or as the one
// person of a single-user state; close its Root. Its agent signs with the
// identity serve uses, logging on stderr.
func (p *personFlags) openPerson(ctx context.Context, stderr io.Writer) (*person.State, error) {
	root, where, err := p.openStore(ctx)
	if err != nil {
		return nil, app.StateError(where, err)
	}
	ps, err := person.Open(ctx, root, p.user)
	if err != nil {
		root.Close()
		return nil, err
	}
	ps.Agent = func(ctx context.Context, st *store.Store) (*auth.Agent, error) {
		id, err := loadIdentity(ctx, &p.common, root, stderr)
		if err != nil {
			return nil, err
		}
		return auth.New(id, &auth.Options{HTTPClient: &http.Client{Transport: p.transport()}, Store: st}), nil
	}
	return ps, nil
}

// findCompany is the Company domain names, its documents read through the
// network guard (person.FindCompany).
func (p *personFlags) findCompany(ctx context.Context, ps *person.State, domain string) (*person.Company, error) {
	return person.FindCompany(ctx, discovery.New(app.DocumentClient(p.transport()), nil), ps.Store, domain)
}

// loadIdentity loads the identity serve would use from the open state st
// (app.LoadIdentity), logging on stderr as the flags say.
func loadIdentity(ctx context.Context, c *common, st *store.Store, stderr io.Writer) (*auth.Identity, error) {
	logger, err := c.logger(stderr)
	if err != nil {
		return nil, err
	}
	return app.LoadIdentity(ctx, st, c.clientID, logger)
}
