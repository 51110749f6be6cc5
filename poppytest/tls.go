package poppytest

// This file makes the certificate authorities and the leaf certificate of
// each Server, which covers the Company's domains, the agent's host, and
// every subdomain of each. A Server has a CA of its own, or shares its
// Front's.

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

// certAuthority is a freshly generated CA that issues the leaves of the
// Servers it serves. It is immutable once made, so safe for concurrent use.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	pool *x509.CertPool
}

// authority is a Server's view of its CA and the one leaf the CA issued it.
// It is immutable once made, so safe for concurrent use.
type authority struct {
	caPEM []byte
	pool  *x509.CertPool
	leaf  tls.Certificate
	names []string // the names the leaf covers: domains, agent host, and wildcards
}

// newAuthority makes an ECDSA P-256 CA and a leaf for each of domains and
// its subdomains (*.domain), agentHost and *.agentHost (and 127.0.0.1),
// valid around now. The first domain names the CA.
func newAuthority(domains []string, agentHost string, now time.Time) (*certAuthority, *authority, error) {
	ca, err := newCertAuthority("poppytest CA for "+domains[0], now)
	if err != nil {
		return nil, nil, err
	}
	a, err := ca.issue(domains, agentHost, now)
	return ca, a, err
}

// newCertAuthority makes an ECDSA P-256 CA named name, valid around now.
func newCertAuthority(name string, now time.Time) (*certAuthority, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
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
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &certAuthority{cert: ca, key: caKey, pool: pool,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}, nil
}

// issue makes a leaf for each of domains and *.domain, agentHost and
// *.agentHost (and 127.0.0.1), valid around now and no longer than the CA.
// The first domain is its subject.
func (ca *certAuthority) issue(domains []string, agentHost string, now time.Time) (*authority, error) {
	domain := domains[0]
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	var names []string
	for _, d := range domains {
		names = append(names, d, "*."+d)
	}
	names = append(names, agentHost, "*."+agentHost)
	notAfter := now.Add(90 * 24 * time.Hour)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: domain},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca.cert, &leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate: %w", err)
	}
	return &authority{
		caPEM: ca.pem,
		pool:  ca.pool,
		leaf:  tls.Certificate{Certificate: [][]byte{leafDER, ca.cert.Raw}, PrivateKey: leafKey},
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
