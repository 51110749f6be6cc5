package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/browser"
)

// startBrowser starts poppy-mcp's own headless Chromium for --browser PATH
// ("auto" finds one). In demo mode it resolves the demo Company's names to
// its listener and trusts its CA, as --resolve and SSL_CERT_FILE do for Go.
func (a *app) startBrowser(path string, c *common) (*browser.Browser, error) {
	if path == "auto" {
		p, err := browser.Find()
		if err != nil {
			return nil, err
		}
		path = p
	}
	flags := map[string]any{}
	var rules []string
	for hostport, addr := range c.resolve {
		host := hostport[:strings.LastIndex(hostport, ":")]
		rules = append(rules, "MAP "+host+" "+addr)
	}
	if a.demo != nil {
		addr := a.demo.srv.Addr()
		rules = append(rules, "MAP "+demoDomain+" "+addr, "MAP *."+demoDomain+" "+addr)
		spki, err := caSPKIHash(a.demo.srv.CAPEM())
		if err != nil {
			return nil, err
		}
		flags["ignore-certificate-errors-spki-list"] = spki
	}
	if len(rules) > 0 {
		flags["host-resolver-rules"] = strings.Join(rules, ", ")
	}
	return browser.New(path, &browser.Options{Flags: flags})
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
