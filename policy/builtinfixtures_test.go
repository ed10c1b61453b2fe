package policy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"time"
)

// cryptoFixtures are PEM documents for the certificate and key builtins, generated once per test binary.
var cryptoFixtures = sync.OnceValue(func() (f struct{ cert, key, csr, rsaKey string }) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "probe"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, DNSNames: []string{"probe.example"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "probe"}}, key)
	if err != nil {
		panic(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	encode := func(typ string, b []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})) }
	f.cert, f.key, f.csr = encode("CERTIFICATE", der), encode("PRIVATE KEY", pkcs8), encode("CERTIFICATE REQUEST", csr)
	f.rsaKey = encode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))
	return f
})

// repeatPEM repeats a PEM document until it is about n bytes long (at least once).
func repeatPEM(doc string, n int) string {
	return strings.Repeat(doc, max(n/len(doc), 1))
}
