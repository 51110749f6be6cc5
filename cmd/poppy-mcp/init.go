package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runInit creates (or loads) the agent's signing key in the state dir and
// writes agent.json and jwks.json to publish at client_id and jwks_uri
// (Poppy 0.1 §4.1).
func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	var c common
	c.register(fs)
	var redirects listFlag
	fs.Var(&redirects, "redirect-uri", "a Direct Sign-In callback on the client_id's host (repeatable)")
	out := fs.String("out", ".", "where to write agent.json and jwks.json")
	name := fs.String("client-name", "poppy-mcp", "client_name shown to the user on Companies' sign-in pages")
	rotate := fs.Bool("rotate", false, "make a new signing key; the old public key stays in jwks.json for 7 days")
	if !parse(fs, args, stderr) || fs.NArg() > 0 || c.clientID == "" {
		fmt.Fprintln(stderr, "usage: poppy-mcp init --client-id https://YOUR.DOMAIN/agent.json [--redirect-uri URL]... [--out DIR] [--rotate]")
		return 2
	}
	st, dir, err := c.openStore(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp init:", err)
		return 1
	}
	defer st.Close()
	id, err := auth.NewIdentity(ctx, c.clientID, &auth.IdentityOptions{Store: st, ClientName: *name, RedirectURIs: redirects})
	if err != nil {
		fmt.Fprintln(stderr, "poppy-mcp init:", err)
		return 2
	}
	if *rotate {
		if err := id.Rotate(ctx); err != nil {
			fmt.Fprintln(stderr, "poppy-mcp init:", err)
			return 1
		}
	}
	if err := writeIdentityDocs(id, *out); err != nil {
		fmt.Fprintln(stderr, "poppy-mcp init:", err)
		return 1
	}
	md := id.Metadata()
	fmt.Fprintf(stdout, "Identity ready: signing key %s, kept in %s (key protected by: %s).\n", id.CurrentKeyID(), dir, st.KeySource())
	fmt.Fprintf(stdout, "Publish these two files over HTTPS:\n  %s  at %s\n  %s  at %s\n",
		filepath.Join(*out, "agent.json"), md.ClientID, filepath.Join(*out, "jwks.json"), md.JWKSURI)
	fmt.Fprintf(stdout, "Then run: poppy-mcp serve --client-id %s\n", md.ClientID)
	return 0
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
