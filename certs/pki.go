package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Keys are ECDSA P-256 and certificates are signed with ECDSA-SHA256: small, fast to generate, and
// accepted by every supported apiserver. Parsing also accepts RSA keys so that a Secret prepared by
// hand or by another tool can be read (and then judged on its merits).

// NotBeforeSkew is how far back NotBefore is set on every certificate this package issues, so that an
// apiserver whose clock runs a little behind ours still accepts a certificate issued a moment ago.
const NotBeforeSkew = 5 * time.Minute

// KeyPair is a parsed certificate with its private key, and the PEM it was read from or written to.
type KeyPair struct {
	// Cert is the parsed certificate (for a chain, the first one).
	Cert *x509.Certificate
	// Key is the private key matching Cert's public key.
	Key crypto.Signer
	// CertPEM is the PEM encoding of Cert (and, when read from a Secret, of any chain after it).
	CertPEM []byte
	// KeyPEM is the PEM encoding of Key.
	KeyPEM []byte
}

// NewCA creates a self-signed CA certificate (IsCA, key usages CertSign and CRLSign, path length 0)
// valid from now-NotBeforeSkew until now+validity, with an ECDSA P-256 key.
func NewCA(now time.Time, validity time.Duration, commonName string) (*KeyPair, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("create CA %q: validity must be positive, got %s", commonName, validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create CA %q: generate key: %w", commonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("create CA %q: %w", commonName, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-NotBeforeSkew),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA %q: sign: %w", commonName, err)
	}
	return newKeyPair(der, key)
}

// NewServingLeaf creates a serving certificate signed by ca, for the given DNS names and IP addresses
// (extended key usage ServerAuth, not a CA). It is valid from now-NotBeforeSkew until now+validity or
// until the CA expires, whichever comes first, so that a leaf never outlives the CA that vouches for it.
func NewServingLeaf(now time.Time, validity time.Duration, ca *KeyPair, dnsNames []string, ips []net.IP) (*KeyPair, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("create serving certificate: no CA to sign it")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("create serving certificate: validity must be positive, got %s", validity)
	}
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("create serving certificate: no DNS names or IP addresses to put in it")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}
	notAfter := now.Add(validity)
	if ca.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.NotAfter
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	} else {
		cn = ips[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-NotBeforeSkew),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              slices.Clone(dnsNames),
		IPAddresses:           slices.Clone(ips),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: sign with CA %q: %w", ca.Cert.Subject.CommonName, err)
	}
	return newKeyPair(der, key)
}

func newKeyPair(der []byte, key *ecdsa.PrivateKey) (*KeyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the certificate just created: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// ParseKeyPair parses a PEM certificate (the first CERTIFICATE block; later ones are kept in CertPEM as
// the chain) and a PEM private key (PKCS#8, SEC 1 EC or PKCS#1 RSA), and checks that the key belongs to
// the certificate. It never panics on malformed input; the error says what is wrong.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, fmt.Errorf("private key does not match the certificate %q", certs[0].Subject.CommonName)
	}
	return &KeyPair{Cert: certs[0], Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ParseCertificates parses every CERTIFICATE block in data, in order. It fails when there is none or
// when one does not parse; other block types are ignored.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return out, nil
}

// EncodeCertificates returns the PEM encoding of certs, in order.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

func parsePrivateKey(data []byte) (crypto.Signer, error) {
	var block *pem.Block
	for rest := data; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		if block.Type == "PRIVATE KEY" || block.Type == "EC PRIVATE KEY" || block.Type == "RSA PRIVATE KEY" {
			break // other blocks, such as "EC PARAMETERS", may precede the key
		}
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PKCS#8 private key does not parse: %w", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("private key of type %T cannot sign", k)
		}
		return s, nil
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("EC private key does not parse: %w", err)
		}
		return k, nil
	default: // "RSA PRIVATE KEY"
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("RSA private key does not parse: %w", err)
		}
		return k, nil
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	switch ka := a.(type) {
	case *ecdsa.PublicKey:
		return ka.Equal(b)
	case *rsa.PublicKey:
		return ka.Equal(b)
	default:
		if eq, ok := a.(interface{ Equal(crypto.PublicKey) bool }); ok {
			return eq.Equal(b)
		}
		return false
	}
}

// isUsableCA reports why c cannot act as a CA at now, or "" when it can.
func isUsableCA(c *x509.Certificate, now time.Time) string {
	switch {
	case !c.IsCA || !c.BasicConstraintsValid:
		return "it is not a CA certificate"
	case c.KeyUsage&x509.KeyUsageCertSign == 0:
		return "it lacks the certSign key usage"
	case now.Before(c.NotBefore):
		return fmt.Sprintf("it is not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(c.NotAfter):
		return fmt.Sprintf("it expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// verifiesWith reports whether leaf chains to one of roots at now for server authentication.
func verifiesWith(leaf *x509.Certificate, roots []*x509.Certificate, now time.Time) bool {
	if leaf == nil || len(roots) == 0 {
		return false
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:       pool,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err == nil
}

// sameNames reports whether leaf carries exactly the wanted DNS names and IP addresses (in any order).
func sameNames(leaf *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	a, b := slices.Clone(leaf.DNSNames), slices.Clone(dnsNames)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(slices.Compact(a), slices.Compact(b)) {
		return false
	}
	ipKey := func(in []net.IP) []string {
		out := make([]string, 0, len(in))
		for _, ip := range in {
			out = append(out, ip.String())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(ipKey(leaf.IPAddresses), ipKey(ips))
}
