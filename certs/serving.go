package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
)

// ServingCert is the certificate the webhook server presents, held in memory and swapped atomically by
// the reconcilers, so a renewed certificate is served on the next TLS handshake without a restart or a
// file on disk. The zero value is ready to use and serves nothing until the first Set.
type ServingCert struct {
	current atomic.Pointer[servedPair]
}

type servedPair struct {
	tls     *tls.Certificate
	certPEM []byte
	keyPEM  []byte
}

// NewServingCert returns an empty ServingCert.
func NewServingCert() *ServingCert { return &ServingCert{} }

// GetCertificate returns the current serving certificate; it has the signature of
// tls.Config.GetCertificate. Before the first Set it fails, so the handshake fails instead of serving
// something the apiserver cannot trust.
func (s *ServingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p := s.current.Load()
	if p == nil {
		return nil, errors.New("webhook serving certificate is not loaded yet")
	}
	return p.tls, nil
}

// Set parses a PEM certificate (with its chain) and key and serves them from the next handshake on. It
// reports whether the served certificate changed. On error the previous certificate stays in place.
func (s *ServingCert) Set(certPEM, keyPEM []byte) (changed bool, err error) {
	if p := s.current.Load(); p != nil && bytes.Equal(p.certPEM, certPEM) && bytes.Equal(p.keyPEM, keyPEM) {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("load serving certificate: %w", err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return false, fmt.Errorf("load serving certificate: %w", err)
		}
	}
	s.current.Store(&servedPair{tls: &pair, certPEM: bytes.Clone(certPEM), keyPEM: bytes.Clone(keyPEM)})
	return true, nil
}

// Leaf returns the parsed certificate being served, or nil before the first Set.
func (s *ServingCert) Leaf() *x509.Certificate {
	if p := s.current.Load(); p != nil {
		return p.tls.Leaf
	}
	return nil
}

// Loaded reports whether a certificate is being served.
func (s *ServingCert) Loaded() bool { return s.current.Load() != nil }

// TLSOptions tune the TLS configuration of the webhook server.
type TLSOptions struct {
	// MinVersion is the lowest TLS version accepted, e.g. tls.VersionTLS13. Zero means tls.VersionTLS12.
	MinVersion uint16
}

// TLSOpts returns the functions for controller-runtime's webhook.Options.TLSOpts: they serve s through
// GetCertificate, set the minimum TLS version, and offer only HTTP/1.1, which turns HTTP/2 off (the
// HTTP/2 Rapid Reset advisories GHSA-qppj-fm5r-hxr3 and GHSA-4374-p667-p6c8).
func (s *ServingCert) TLSOpts(o TLSOptions) []func(*tls.Config) {
	minVersion := o.MinVersion
	if minVersion == 0 {
		minVersion = tls.VersionTLS12
	}
	return []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = s.GetCertificate
		c.MinVersion = minVersion
		c.NextProtos = []string{"http/1.1"}
	}}
}
