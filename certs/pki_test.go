package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, now time.Time, validity time.Duration) *KeyPair {
	t.Helper()
	ca, err := NewCA(now, validity, "test-ca")
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func mustLeaf(t *testing.T, now time.Time, validity time.Duration, ca *KeyPair, names ...string) *KeyPair {
	t.Helper()
	l, err := NewServingLeaf(now, validity, ca, names, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatalf("NewServingLeaf: %v", err)
	}
	return l
}

func TestNewCATemplate(t *testing.T) {
	ca := mustCA(t, t0, 10*time.Hour)
	c := ca.Cert
	checks := []struct {
		name string
		ok   bool
	}{
		{"is a CA", c.IsCA && c.BasicConstraintsValid},
		{"can sign certificates", c.KeyUsage&x509.KeyUsageCertSign != 0},
		{"path length zero", c.MaxPathLen == 0 && c.MaxPathLenZero},
		{"self-signed", c.CheckSignatureFrom(c) == nil},
		{"ECDSA P-256", func() bool { k, ok := c.PublicKey.(*ecdsa.PublicKey); return ok && k.Curve == elliptic.P256() }()},
		{"NotBefore backdated by the skew", c.NotBefore.Equal(t0.Add(-NotBeforeSkew))},
		{"NotAfter is now+validity", c.NotAfter.Equal(t0.Add(10 * time.Hour))},
		{"PEM round-trips", func() bool { p, err := ParseKeyPair(ca.CertPEM, ca.KeyPEM); return err == nil && p.Cert.Equal(c) }()},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("CA certificate: %s does not hold", ch.name)
		}
	}
}

func TestNewServingLeafTemplate(t *testing.T) {
	ca := mustCA(t, t0, 10*time.Hour)
	tests := []struct {
		name         string
		validity     time.Duration
		wantNotAfter time.Time
	}{
		{"within the CA's life", 2 * time.Hour, t0.Add(2 * time.Hour)},
		{"capped at the CA's expiry", 20 * time.Hour, t0.Add(10 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLeaf(t, t0, tt.validity, ca, "svc", "svc.ns.svc")
			c := l.Cert
			if c.IsCA {
				t.Error("leaf is a CA")
			}
			if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
				t.Errorf("ExtKeyUsage = %v, want [ServerAuth]", c.ExtKeyUsage)
			}
			if !sameNames(c, []string{"svc.ns.svc", "svc"}, []net.IP{net.ParseIP("127.0.0.1")}) {
				t.Errorf("SANs = %v %v", c.DNSNames, c.IPAddresses)
			}
			if !c.NotAfter.Equal(tt.wantNotAfter) {
				t.Errorf("NotAfter = %s, want %s", c.NotAfter, tt.wantNotAfter)
			}
			if !verifiesWith(c, []*x509.Certificate{ca.Cert}, t0) {
				t.Error("leaf does not verify against its CA")
			}
			other := mustCA(t, t0, time.Hour)
			if verifiesWith(c, []*x509.Certificate{other.Cert}, t0) {
				t.Error("leaf verifies against an unrelated CA")
			}
			if verifiesWith(c, []*x509.Certificate{ca.Cert}, c.NotAfter.Add(time.Second)) {
				t.Error("leaf verifies after its expiry")
			}
		})
	}
}

func TestNewServingLeafRejectsBadInput(t *testing.T) {
	ca := mustCA(t, t0, time.Hour)
	tests := []struct {
		name     string
		ca       *KeyPair
		validity time.Duration
		dns      []string
		ips      []net.IP
		want     string
	}{
		{"no CA", nil, time.Hour, []string{"a"}, nil, "no CA"},
		{"zero validity", ca, 0, []string{"a"}, nil, "validity"},
		{"no names", ca, time.Hour, nil, nil, "no DNS names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServingLeaf(t0, tt.validity, tt.ca, tt.dns, tt.ips)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseKeyPair(t *testing.T) {
	ca := mustCA(t, t0, time.Hour)
	other := mustCA(t, t0, time.Hour)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := ca.Key.(*ecdsa.PrivateKey)
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})
	withParams := append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}), sec1...)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})

	tests := []struct {
		name    string
		cert    []byte
		key     []byte
		wantErr string
	}{
		{"PKCS#8", ca.CertPEM, ca.KeyPEM, ""},
		{"SEC 1 EC key", ca.CertPEM, sec1, ""},
		{"EC PARAMETERS before the key", ca.CertPEM, withParams, ""},
		{"chain after the leaf", append(append([]byte{}, ca.CertPEM...), other.CertPEM...), ca.KeyPEM, ""},
		{"empty certificate", nil, ca.KeyPEM, "no PEM CERTIFICATE"},
		{"not PEM", []byte("hello"), ca.KeyPEM, "no PEM CERTIFICATE"},
		{"corrupt DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), ca.KeyPEM, "does not parse"},
		{"empty key", ca.CertPEM, nil, "no PEM private key"},
		{"corrupt key", ca.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), "does not parse"},
		{"key of another certificate", ca.CertPEM, other.KeyPEM, "does not match"},
		{"RSA key for an EC certificate", ca.CertPEM, rsaPEM, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := ParseKeyPair(tt.cert, tt.key)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseKeyPair: %v", err)
				}
				if !kp.Cert.Equal(ca.Cert) {
					t.Fatal("parsed the wrong certificate")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestEncodeParseCertificatesRoundTrip(t *testing.T) {
	a, b := mustCA(t, t0, time.Hour), mustCA(t, t0, 2*time.Hour)
	got, err := ParseCertificates(EncodeCertificates([]*x509.Certificate{a.Cert, b.Cert}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Equal(a.Cert) || !got[1].Equal(b.Cert) {
		t.Fatalf("round trip changed the certificates or their order")
	}
}

func TestIsUsableCA(t *testing.T) {
	ca := mustCA(t, t0, time.Hour)
	leaf := mustLeaf(t, t0, time.Hour, ca, "svc")
	tests := []struct {
		name string
		cert *x509.Certificate
		at   time.Time
		want string
	}{
		{"valid", ca.Cert, t0, ""},
		{"expired", ca.Cert, t0.Add(time.Hour), "expired"},
		{"not yet valid", ca.Cert, t0.Add(-time.Hour), "not valid before"},
		{"a leaf", leaf.Cert, t0, "not a CA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := isUsableCA(tt.cert, tt.at)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("isUsableCA = %q, want %q", got, tt.want)
			}
		})
	}
}
