package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/app"
	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// initConfig is init's parsed command line.
type initConfig struct {
	common
	redirects listFlag
	out, name string
	rotate    bool
}

// initFlags registers init's flags on fs, bound to a new config.
func initFlags(fs *flag.FlagSet) *initConfig {
	cfg := &initConfig{}
	cfg.register(fs)
	fs.Var(&cfg.redirects, "redirect-uri", "a Direct Sign-In callback `URL` on the client_id's host (repeatable; default: those stored by the last init)")
	fs.StringVar(&cfg.out, "out", ".", "write agent.json and jwks.json to `DIR` (default: the current directory)")
	fs.StringVar(&cfg.name, "client-name", "poppy-mcp", "the client_name `NAME` shown to the user on Companies' sign-in pages (default: the one stored by the last init, else poppy-mcp)")
	fs.BoolVar(&cfg.rotate, "rotate", false, "make a new signing key; the old public key stays in jwks.json for 7 days")
	return cfg
}

// runInit creates (or loads) the agent's signing key in the state dir,
// stores the client metadata it was told for serve to publish and use, and
// writes agent.json and jwks.json to publish at client_id and jwks_uri
// (Poppy 0.1 §4.1).
func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	cfg := initFlags(fs)
	c := &cfg.common
	if !parse(fs, args, stderr) || fs.NArg() > 0 || c.clientID == "" {
		return usageError(stderr, "init")
	}
	st, dir, err := c.openStore(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp init:", app.StateError(dir, err))
		return 1
	}
	defer st.Close()
	opts, kept := initMetadata(ctx, st, c.clientID, cfg.redirects, fs, cfg.name)
	id, err := auth.NewIdentity(ctx, c.clientID, opts)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp init:", err)
		return 2
	}
	if err := finishInit(ctx, st, id, cfg.rotate, cfg.out); err != nil {
		fmt.Fprintln(stderr, "poppy-mcp init:", err)
		return 1
	}
	md := id.Metadata()
	fmt.Fprintf(stdout, "Identity ready: signing key %s, kept in %s (key protected by: %s).\n", id.CurrentKeyID(), dir, st.KeySource())
	if kept != "" {
		fmt.Fprintln(stdout, kept)
	}
	fmt.Fprintf(stdout, "Publish these two files over HTTPS:\n  %s  at %s\n  %s  at %s\n",
		filepath.Join(cfg.out, "agent.json"), md.ClientID, filepath.Join(cfg.out, "jwks.json"), md.JWKSURI)
	again := "--state-dir if you gave one here"
	if c.store != "" {
		again = "with the same --store and POPPY_STATE_KEY"
	}
	fmt.Fprintf(stdout, "Then run: poppy-mcp serve (it uses this identity; %s)\n", again)
	return 0
}

// initMetadata is the metadata init makes the identity with: the flags, and
// for what they leave out, what the last init stored for the same
// client_id. kept says what was taken from the store, if anything.
func initMetadata(ctx context.Context, st *store.Store, clientID string, redirects []string, fs *flag.FlagSet, name string) (*auth.IdentityOptions, string) {
	opts := &auth.IdentityOptions{Store: st, ClientName: name, RedirectURIs: redirects}
	stored, err := st.AgentMetadata(ctx)
	if err != nil || stored.ClientID != clientID {
		return opts, ""
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	opts.LogoURI, opts.Extensions = stored.LogoURI, stored.Extensions
	var kept []string
	if !given["client-name"] {
		opts.ClientName = stored.ClientName
	}
	if !given["redirect-uri"] && len(stored.RedirectURIs) > 0 {
		opts.RedirectURIs = stored.RedirectURIs
		kept = append(kept, "redirect_uris "+strings.Join(stored.RedirectURIs, " "))
	}
	if len(kept) == 0 {
		return opts, ""
	}
	return opts, "Kept from the last init: " + strings.Join(kept, "; ") + " (give --redirect-uri to replace them)."
}

// finishInit rotates the key if asked, stores the metadata for serve, and
// writes the two documents to publish.
func finishInit(ctx context.Context, st *store.Store, id *auth.Identity, rotate bool, out string) error {
	if rotate {
		if err := id.Rotate(ctx); err != nil {
			return err
		}
	}
	if err := st.PutAgentMetadata(ctx, app.StoredMetadata(id)); err != nil {
		return err
	}
	return writeIdentityDocs(id, out)
}

func writeIdentityDocs(id *auth.Identity, dir string) error {
	agent, err := id.AgentJSON()
	if err != nil {
		return err
	}
	jwks, err := id.JWKSJSON()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), agent, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "jwks.json"), jwks, 0o644)
}
