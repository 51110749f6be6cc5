package app

// This file is the browse_page tool's browser: poppy-mcp's own headless
// Chromium, behind the network guard.

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/poppy-mcp/poppy-mcp/browser"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
)

// BrowserPath finds the Chromium executable --browser names ("auto" looks
// for one), so that a path that cannot work stops serve at start, in one
// line (a *StartError), instead of failing the first browse_page.
func BrowserPath(path string) (string, error) {
	if path == "auto" {
		p, err := browser.Find()
		if err != nil {
			return "", &StartError{What: "--browser auto: " + strings.TrimPrefix(err.Error(), "browser: "),
				Todo: "install Chromium, or give the path of its executable"}
		}
		return p, nil
	}
	p, err := exec.LookPath(path)
	if err == nil {
		return p, nil
	}
	why := "cannot be run"
	switch {
	case errors.Is(err, exec.ErrNotFound):
		why = "is not found on PATH"
	case errors.Is(err, fs.ErrNotExist):
		why = "does not exist"
	case errors.Is(err, fs.ErrPermission):
		why = "is not an executable file"
	case errors.Is(err, syscall.EISDIR):
		why = "is a directory"
	}
	return "", &StartError{What: fmt.Sprintf("--browser %s %s", path, why),
		Todo: "give the path of Chromium's executable (such as /usr/bin/chromium), or --browser auto to find one"}
}

// startBrowser starts poppy-mcp's own headless Chromium, the executable at
// path. Every connection it makes goes through the network guard (its
// mappings included), which also lets it reach poppy-mcp's own local pages.
// In demo mode it trusts the demo Company's CA, as SSL_CERT_FILE does for Go.
func (a *App) startBrowser(path string, guard *netguard.Options) (*browser.Browser, error) {
	g := *guard
	if u, err := url.Parse(a.pages.BaseURL()); err == nil {
		if ap, err := netip.ParseAddrPort(u.Host); err == nil {
			g.Allow = append(slices.Clone(g.Allow), ap) // the join pages browse_page opens
		}
	}
	flags := map[string]any{}
	if a.opts.Demo != nil {
		spki, err := caSPKIHash(a.opts.Demo.CAPEM)
		if err != nil {
			return nil, err
		}
		flags["ignore-certificate-errors-spki-list"] = spki
	}
	return browser.New(path, &browser.Options{Flags: flags, Dial: netguard.New(&g).DialContext})
}

// caSPKIHash is the base64 SHA-256 of a CA's public key, for Chromium's
// --ignore-certificate-errors-spki-list.
func caSPKIHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return "", errors.New("the demo CA is not PEM")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}
