package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func TestServingCertSet(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now, time.Hour)
	a, b := mustLeaf(t, now, time.Hour, ca, "a"), mustLeaf(t, now, time.Hour, ca, "b")

	s := NewServingCert()
	if _, err := s.GetCertificate(nil); err == nil {
		t.Fatal("GetCertificate before the first Set succeeded")
	}
	steps := []struct {
		name        string
		cert, key   []byte
		wantChanged bool
		wantErr     bool
		wantServed  *x509.Certificate
	}{
		{"first load", a.CertPEM, a.KeyPEM, true, false, a.Cert},
		{"same again", a.CertPEM, a.KeyPEM, false, false, a.Cert},
		{"garbage keeps the current one", []byte("x"), a.KeyPEM, false, true, a.Cert},
		{"mismatched key keeps the current one", b.CertPEM, a.KeyPEM, false, true, a.Cert},
		{"a new one", b.CertPEM, b.KeyPEM, true, false, b.Cert},
	}
	for _, st := range steps {
		changed, err := s.Set(st.cert, st.key)
		if changed != st.wantChanged || (err != nil) != st.wantErr {
			t.Fatalf("%s: Set = %v, %v; want changed=%v err=%v", st.name, changed, err, st.wantChanged, st.wantErr)
		}
		got, err := s.GetCertificate(nil)
		if err != nil || !got.Leaf.Equal(st.wantServed) || !s.Leaf().Equal(st.wantServed) {
			t.Fatalf("%s: serving the wrong certificate", st.name)
		}
	}
}

func TestTLSOpts(t *testing.T) {
	tests := []struct {
		name string
		in   TLSOptions
		want uint16
	}{
		{"default is TLS 1.2", TLSOptions{}, tls.VersionTLS12},
		{"TLS 1.3 when asked", TLSOptions{MinVersion: tls.VersionTLS13}, tls.VersionTLS13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{NextProtos: []string{"h2"}} // what controller-runtime starts from
			for _, f := range NewServingCert().TLSOpts(tt.in) {
				f(cfg)
			}
			if cfg.MinVersion != tt.want {
				t.Errorf("MinVersion = %x, want %x", cfg.MinVersion, tt.want)
			}
			if len(cfg.NextProtos) != 1 || cfg.NextProtos[0] != "http/1.1" {
				t.Errorf("NextProtos = %v, want [http/1.1]", cfg.NextProtos)
			}
			if cfg.GetCertificate == nil {
				t.Error("GetCertificate not set")
			}
		})
	}
}

// TestServingCertHotReload serves real TLS handshakes and swaps the certificate between them.
func TestServingCertHotReload(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now, time.Hour)
	first, second := mustLeaf(t, now, time.Hour, ca, "first"), mustLeaf(t, now, time.Hour, ca, "second")
	s := NewServingCert()
	if _, err := s.Set(first.CertPEM, first.KeyPEM); err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{}
	for _, f := range s.TLSOpts(TLSOptions{}) {
		f(cfg)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	dial := func(c *tls.Config) (*tls.ConnectionState, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), c)
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		st := conn.ConnectionState()
		return &st, nil
	}
	tests := []struct {
		name     string
		before   func()
		client   *tls.Config
		wantCN   string
		wantFail bool
	}{
		{"serves the first certificate", nil, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}, "first", false},
		{"serves the second after a swap, no restart", func() { _, _ = s.Set(second.CertPEM, second.KeyPEM) },
			&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}, "second", false},
		{"refuses TLS 1.1", nil, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS11}, "", true},
		{"does not negotiate HTTP/2", nil, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}}, "second", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before()
			}
			st, err := dial(tt.client)
			if tt.wantFail {
				if err == nil {
					t.Fatal("handshake succeeded")
				}
				return
			}
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if cn := st.PeerCertificates[0].Subject.CommonName; cn != tt.wantCN {
				t.Errorf("served %q, want %q", cn, tt.wantCN)
			}
			if st.NegotiatedProtocol == "h2" {
				t.Error("negotiated HTTP/2")
			}
		})
	}
}
