package aws

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

func TestClusterInfoRequireFor(t *testing.T) {
	full := clusterInfo{endpoint: "https://api", caBundle: "Q0E=", serviceCIDR: "10.100.0.0/16"}
	noCA, noCIDR, noEndpoint := full, full, full
	noCA.caBundle, noCIDR.serviceCIDR, noEndpoint.endpoint = "", "", ""
	failed := noCIDR
	failed.unknown = errors.New("eks:DescribeCluster prod: ResourceNotFoundException")
	tests := []struct {
		name   string
		ci     clusterInfo
		family string
		// want are in the error ("" for none); absent must not be.
		want   []string
		absent []string
	}{
		{name: "everything known", ci: full, family: awsv1.AMIFamilyAL2023},
		{name: "AL2023 needs the CA", ci: noCA, family: awsv1.AMIFamilyAL2023, want: []string{"unknown the certificate authority (set --cluster-ca-bundle or CLUSTER_CA_BUNDLE"},
			absent: []string{"--cluster-endpoint", "--service-cidr"}},
		{name: "AL2023 needs the service CIDR", ci: noCIDR, family: awsv1.AMIFamilyAL2023, want: []string{"unknown the service CIDR (set --service-cidr or SERVICE_CIDR"}},
		{name: "Bottlerocket needs the CA", ci: noCA, family: awsv1.AMIFamilyBottlerocket, want: []string{"--cluster-ca-bundle"}},
		{name: "Bottlerocket does not need the service CIDR", ci: noCIDR, family: awsv1.AMIFamilyBottlerocket},
		{name: "AL2's bootstrap.sh looks the CA up itself", ci: noCA, family: awsv1.AMIFamilyAL2},
		{name: "Custom user data is the user's", ci: noCA, family: awsv1.AMIFamilyCustom},
		{name: "every family needs the endpoint", ci: noEndpoint, family: awsv1.AMIFamilyCustom, want: []string{"unknown the API server endpoint (set --cluster-endpoint or CLUSTER_ENDPOINT)"}},
		{name: "why the sources failed", ci: failed, family: awsv1.AMIFamilyAL2023,
			want: []string{"AL2023 nodes of cluster prod cannot join", "the other sources failed: eks:DescribeCluster prod: ResourceNotFoundException"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ci.requireFor(tt.family, "prod")
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(err.Error(), a) {
					t.Errorf("error has %q: %v", a, err)
				}
			}
		})
	}
}

func TestCABundleFromRESTConfig(t *testing.T) {
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	encoded := base64.StdEncoding.EncodeToString(pem)
	tests := []struct {
		name    string
		tls     rest.TLSClientConfig
		want    string
		wantErr string
	}{
		{name: "CA data", tls: rest.TLSClientConfig{CAData: pem}, want: encoded},
		{name: "CA file (in-cluster)", tls: rest.TLSClientConfig{CAFile: file}, want: encoded},
		{name: "data wins over the file", tls: rest.TLSClientConfig{CAData: []byte("x"), CAFile: file}, want: "eA=="},
		{name: "system roots", want: ""},
		{name: "unreadable file", tls: rest.TLSClientConfig{CAFile: filepath.Join(dir, "missing.crt")}, wantErr: "read the certificate authority of the Kubernetes client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CABundleFromRESTConfig(&rest.Config{TLSClientConfig: tt.tls})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
