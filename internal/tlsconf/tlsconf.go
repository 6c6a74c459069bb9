// Package tlsconf builds the client TLS configurations of erpsync's three
// connections (MySQL, Redis, the ERP) from PEM files: a CA to trust instead
// of the system pool, and optionally a client certificate and key.
//
// It verifies servers always; there is no switch to skip verification.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoCertificate is returned for a CA file without a PEM certificate.
var ErrNoCertificate = errors.New("tlsconf: no PEM certificate")

// Files names the PEM files of a client TLS configuration. Every field may
// be empty.
type Files struct {
	// CA is a bundle of CA certificates the server's chain must lead to.
	// Defaults to the system pool.
	CA string
	// Cert and Key are the client's certificate and private key, for a
	// server that asks for one. Both or neither.
	Cert, Key string
}

// Empty reports whether f names no file.
func (f Files) Empty() bool { return f == Files{} }

// Load returns a TLS 1.2+ client configuration that trusts f.CA (the system
// pool when empty) and presents f.Cert and f.Key when given. ServerName is
// left empty: the client library fills it from the address it dials.
func Load(f Files) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: read CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w in CA file %s", ErrNoCertificate, f.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("tlsconf: a client certificate needs both its certificate and its key file")
	}
	return cfg, nil
}
