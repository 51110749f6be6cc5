package app

// This file gives HTTP mode its bearer token when none is set: on loopback,
// every local process (and every local user) can reach the port, so MCP
// over HTTP needs a token by default, the way notebook servers do. It is
// made once (256 random bits), kept 0600 in the state directory and reused
// on the next start. It is shown once, when it is made and stderr is a
// terminal; otherwise poppy-mcp says where the file is. It never goes to a
// log.

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/poppy-mcp/poppy-mcp/internal/localfile"
)

// httpTokenFile is the token's file in the state directory.
const httpTokenFile = "http-token"

// minTokenLen is the shortest token poppy-mcp accepts from its file: 43
// characters are 256 bits in base64url.
const minTokenLen = 43

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// resolveToken sets o.Token when no token was given and --no-http-token was
// not: the one in dir's token file, made now if there is none.
func (o *HTTPOptions) resolveToken(dir string, stderr io.Writer) error {
	if o.Token != "" || o.NoToken {
		return nil
	}
	path := filepath.Join(dir, httpTokenFile)
	token, made, err := loadOrMakeToken(path)
	if err != nil {
		return fmt.Errorf("the bearer token for MCP over HTTP: %w", err)
	}
	o.Token, o.tokenFile = token, path
	switch {
	case made && o.shownOnTerminal(stderr):
		fmt.Fprintf(stderr, "poppy-mcp: MCP over HTTP needs this bearer token; it is kept in %s and shown only this once:\n\n"+
			"    %s\n\nFor Claude Code, for example:\n\n    claude mcp add --transport http poppy-http %s --header \"Authorization: Bearer %s\"\n\n"+
			"Or set POPPY_HTTP_TOKEN to it where your MCP client's config reads it.\n\n", path, token, o.URL, token)
	case made:
		fmt.Fprintf(stderr, "poppy-mcp: MCP over HTTP needs a bearer token: a new one was made and kept in %s (mode 0600); "+
			"clients send \"Authorization: Bearer\" and its contents.\n", path)
	default:
		fmt.Fprintf(stderr, "poppy-mcp: MCP over HTTP needs the bearer token kept in %s.\n", path)
	}
	return nil
}

// loadOrMakeToken reads the token at path, or makes one there. Of processes
// starting at once, the first to link its file in place wins and the others
// read it.
func loadOrMakeToken(path string) (token string, made bool, err error) {
	if token, err := readToken(path); !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	b := make([]byte, 32)
	rand.Read(b)
	token = base64.RawURLEncoding.EncodeToString(b)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".http-token-*")
	if err != nil {
		return "", false, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(token + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, err
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		token, err := readToken(path)
		return token, false, err
	} else if err != nil {
		return "", false, err
	}
	return token, true, nil
}

// maxTokenFile bounds the token file: a token is a line of a few dozen characters.
const maxTokenFile = 4 << 10

// readToken reads a token file, tightening its mode to 0600 if needed.
func readToken(path string) (string, error) {
	b, err := localfile.Read(path, maxTokenFile) // internal/localfile: never a FIFO or a device
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&^0o600 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", err
		}
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenLen || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("%s does not hold a token of at least %d characters: delete it and a new one is made", path, minTokenLen)
	}
	return token, nil
}

// shownOnTerminal reports whether stderr is a terminal, where the token
// may be shown: by the test seam terminal when set.
func (o *HTTPOptions) shownOnTerminal(stderr io.Writer) bool {
	if o.terminal != nil {
		return o.terminal(stderr)
	}
	return isTerminal(stderr)
}
