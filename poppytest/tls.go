package poppytest

// This file makes the Server's certificate authority and its one leaf
// certificate, which covers the Company's domains, the agent's host, and
// every subdomain of each.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// authority is a freshly generated CA and the leaf it signed. It is immutable
// once made, so safe for concurrent use.
type authority struct {
	caPEM []byte
	pool  *x509.CertPool
	leaf  tls.Certificate
	names []string // the names the leaf covers: domains, agent host, and wildcards
}

// newAuthority makes an ECDSA P-256 CA and a leaf for each of domains and
// its subdomains (*.domain), agentHost and *.agentHost (and 127.0.0.1),
// valid around now. The first domain names the CA.
func newAuthority(domains []string, agentHost string, now time.Time) (*authority, error) {
	domain := domains[0]
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "poppytest CA for " + domain},
		NotBefore:             now.Add(-24 * time.Hour),
		NotAfter:              now.Add(90 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	var names []string
	for _, d := range domains {
		names = append(names, d, "*."+d)
	}
	names = append(names, agentHost, "*."+agentHost)
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: domain},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &authority{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:  pool,
		leaf:  tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey},
		names: names,
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic("poppytest: serial: " + err.Error())
	}
	return n
}

// covers reports whether the leaf is valid for the lowercased host: one of
// its names, or a single label under one of its wildcards (RFC 6125 §6.4.3).
func (a *authority) covers(host string) bool {
	for _, n := range a.names {
		if rest, ok := strings.CutPrefix(n, "*."); ok {
			label, parent, found := strings.Cut(host, ".")
			if found && label != "" && parent == rest {
				return true
			}
		} else if host == n {
			return true
		}
	}
	return false
}
